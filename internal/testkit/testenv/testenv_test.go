package testenv

import (
	"testing"
	"time"
)

func TestTimeout(t *testing.T) {
	for _, c := range []struct {
		scale string
		d     time.Duration
		want  time.Duration
	}{
		{"", time.Second, time.Minute},
		{"", 3 * time.Minute, 3 * time.Minute},
		{"2", time.Second, 2 * time.Minute},
		{"0.5", 4 * time.Minute, 2 * time.Minute},
		{"1e30", time.Minute, time.Duration(1<<63 - 1)},
	} {
		t.Setenv(ScaleEnv, c.scale)
		if got := Timeout(c.d); got != c.want {
			t.Errorf("%s=%q: Timeout(%v) = %v, want %v", ScaleEnv, c.scale, c.d, got, c.want)
		}
	}
}

func TestScaleRejectsBadValues(t *testing.T) {
	for _, v := range []string{"x", "0", "-1", "NaN", "Inf"} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(ScaleEnv, v)
			defer func() {
				if recover() == nil {
					t.Errorf("Scale() with %s=%q did not panic", ScaleEnv, v)
				}
			}()
			Scale()
		})
	}
}
