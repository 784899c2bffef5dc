package restartschedule

// JitterDelay exposes jitterDelay to the integration tests, which check
// that a workload was restarted no earlier than its derived delay.
var JitterDelay = jitterDelay
