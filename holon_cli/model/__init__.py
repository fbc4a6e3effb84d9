"""Pure values: envelopes, agents, work items, turn records. No I/O here."""
