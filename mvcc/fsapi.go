package mvcc

// Helpers for the fs layer (fs/), kept out of the core files.

// LastHLC returns the newest HLC issued so far (by a commit or by Now),
// without issuing a new one. A state as of an HLC strictly below it can no
// longer change: every later commit gets a greater HLC, and commits take
// their HLC inside the serialized write transaction, so at most the one
// commit stamped LastHLC itself may still be in flight.
func (s *Store) LastHLC() HLC { return s.clock.Last() }
