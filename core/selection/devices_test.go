package selection

import (
	"errors"
	"strings"
	"testing"
)

func TestDeviceKeysAreParsed(t *testing.T) {
	res, err := ParseWith(`[{"name":"a","deviceID":"0000:18:02.5","infiniband-guid":"c2:11:22:33:44:55:66:77"}]`, "ns", ParseOptions{Compat: true})
	if err != nil {
		t.Fatal(err)
	}
	el := res.Elements[0]
	if el.DeviceID != "0000:18:02.5" || el.InfinibandGUID != "c2:11:22:33:44:55:66:77" {
		t.Fatalf("deviceID %q, infiniband-guid %q", el.DeviceID, el.InfinibandGUID)
	}
	if len(res.Warnings) != 0 {
		t.Fatalf("known keys warned: %v", res.Warnings)
	}
}

func TestInvalidDeviceKeysInvalidateTheAnnotation(t *testing.T) {
	tests := []struct{ name, value, wantInErr string }{
		{"deviceID path", `[{"name":"a","deviceID":"../../etc/passwd"}]`, "not a device ID"},
		{"deviceID slash", `[{"name":"a","deviceID":"a/b"}]`, "not a device ID"},
		{"deviceID empty", `[{"name":"a","deviceID":""}]`, "empty"},
		{"deviceID not string", `[{"name":"a","deviceID":5}]`, "must be a string"},
		{"deviceID too long", `[{"name":"a","deviceID":"` + strings.Repeat("a", 129) + `"}]`, "longer than"},
		{"guid 6 bytes", `[{"name":"a","infiniband-guid":"aa:bb:cc:dd:ee:ff"}]`, "8-byte InfiniBand GUID"},
		{"guid garbage", `[{"name":"a","infiniband-guid":"nope"}]`, "8-byte InfiniBand GUID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWith(tt.value, "ns", ParseOptions{Compat: true})
			var perr *Error
			if !errors.As(err, &perr) || perr.Index != 0 {
				t.Fatalf("want *Error at element 0, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Fatalf("error %q should contain %q", err, tt.wantInErr)
			}
		})
	}
}
