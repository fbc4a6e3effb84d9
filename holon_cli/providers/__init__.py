"""Model transports behind one small interface (see ``base``), plus the
scripted replay provider and the retry/fallback chain."""
