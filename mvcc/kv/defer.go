package kv

// Deferrer is implemented by transactions whose Update may return before
// it has committed (the PostgreSQL driver): Defer, called inside the
// Update's callback, lets that Update return as soon as its callback has
// succeeded. Its writes are then visible to every later transaction of
// the process (a View first commits them, an Update joins them), and
// commit, in order with every other Update, within the driver's deferral
// window or with the next Update that waits, whichever comes first. A
// crash of the process within that window can lose them (and only the
// deferred Updates after them); Sync reports a deferred commit that
// failed. Drivers without it (bbolt, the WAL) commit every Update before
// it returns.
type Deferrer interface {
	Defer()
}

// Defer marks the Update of tx as deferrable when its driver can defer it.
func Defer(tx Txn) {
	if d, ok := tx.(Deferrer); ok {
		d.Defer()
	}
}
