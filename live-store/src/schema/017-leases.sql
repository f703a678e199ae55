-- The live store, version 17: leases. Work that must run on one api at a
-- time (the background duties of api replicas sharing a store) is done by
-- whoever holds its lease; a holder renews it before `until` (ms), and a
-- lease not renewed by then may be taken by another.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until INTEGER NOT NULL
) STRICT;
