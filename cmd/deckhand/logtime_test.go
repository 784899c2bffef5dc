package main

import (
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

// stringsEncoder collects what an encoder appends.
type stringsEncoder struct {
	zapcore.PrimitiveArrayEncoder
	got []string
}

func (e *stringsEncoder) AppendString(s string) { e.got = append(e.got, s) }

func TestLogTimeEncoderStampsUTCMilliseconds(t *testing.T) {
	at := time.Date(2026, 11, 28, 18, 30, 59, 957_400_000, time.FixedZone("CET", 3600))
	enc := &stringsEncoder{}
	logTimeEncoder(at, enc)
	if want := "2026-11-28T17:30:59.957Z"; len(enc.got) != 1 || enc.got[0] != want {
		t.Fatalf("stamped %q, want [%q]", enc.got, want)
	}
}
