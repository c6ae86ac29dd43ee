package layers

// SweepNow waits for the takes in flight, then does what the sweeper
// does on a tick: gives back the slices ended by now.
func (l *Leases) SweepNow() {
	l.takes.Wait()
	l.collect(l.nanos(), false)
	l.giveBack()
}

// WaitTakes waits for the takes in flight.
func (l *Leases) WaitTakes() { l.takes.Wait() }
