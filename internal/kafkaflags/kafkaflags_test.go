package kafkaflags_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/internal/dlq"
	"github.com/patchflow/patchflow/internal/listener"
	"github.com/patchflow/patchflow/internal/settings"
	"github.com/patchflow/patchflow/proving/loadgen"
)

// Every program that reads KAFKA_BROKERS shows it masked: credentials
// written into it are neither in its errors nor in its effective
// configuration.
func TestBrokersWithCredentialsAreShownMasked(t *testing.T) {
	const password = "Zq7wPm3x"
	parses := map[string]func(args []string) (*settings.Set, error){
		"listener": func(a []string) (*settings.Set, error) { _, s, err := listener.Parse(a, none); return s, err },
		"dlq":      func(a []string) (*settings.Set, error) { _, s, err := dlq.Parse(a, none); return s, err },
		"loadgen":  func(a []string) (*settings.Set, error) { _, s, err := loadgen.Parse(a, none); return s, err },
	}
	for name, parse := range parses {
		for _, brokers := range []string{"app:" + password + "@kafka:9092", "kafka:9092,sasl://app:" + password + "@kafka:9093"} {
			set, err := parse([]string{"-kafka-brokers", brokers})
			shown := fmt.Sprint(err) + fmt.Sprint(set.Effective()...)
			if strings.Contains(shown, password) {
				t.Errorf("%s with KAFKA_BROKERS=%q: %s", name, brokers, shown)
			}
			var se *settings.Error
			if name != "loadgen" && (!errors.As(err, &se) || se.Env != "KAFKA_BROKERS") {
				t.Errorf("%s with KAFKA_BROKERS=%q: error %v; want KAFKA_BROKERS refused", name, brokers, err)
			}
		}
	}
}

func none(string) (string, bool) { return "", false }
