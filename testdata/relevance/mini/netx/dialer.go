package netx

import "time"

// Dialer connects to a server, waiting longer after each failed attempt:
// the delay between attempts grows exponentially up to MaxDelay.
type Dialer struct {
	MaxDelay time.Duration
}

// nextDelay doubles d, capped at MaxDelay.
func (d *Dialer) nextDelay(cur time.Duration) time.Duration {
	return min(2*cur, d.MaxDelay)
}
