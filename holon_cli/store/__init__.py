"""The only code that touches the home: atomic writes, locks, ledgers, inbox.

Invariants:
- snapshots are replaced atomically (temp file, fsync, rename, fsync dir);
- ledgers are append-only JSONL, one ``os.write`` per record under the
  ledger's lock, fsync'd before the caller acknowledges anything;
- a torn last line is ignored on read and cut off before the next append;
  a torn line in the middle is corruption and is reported with file and line;
- the inbox is a Maildir: any number of writers, no lock.
"""
