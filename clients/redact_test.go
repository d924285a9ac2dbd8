package clients_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/patchflow/patchflow/clients"
)

const basePassword = "Hd2nLcVu"

// A base URL with credentials that the clients refuse is reported with its
// password masked, however it is malformed.
func TestBaseURLErrorsHideThePassword(t *testing.T) {
	for _, base := range []string{
		"ftp://user:" + basePassword + "@vmaas",
		"http://user:" + basePassword + "@vmaas:80x0",
		"http://user:" + basePassword + "/x@vmaas",
		"http://user:" + basePassword + "@vmaas/?token=" + basePassword,
		"http://user:" + basePassword + "@vmaas/%zz",
	} {
		_, verr := clients.NewVMaaS(base, clients.VMaaSOptions{})
		_, ierr := clients.NewInventory(base, clients.InventoryOptions{})
		for _, err := range []error{verr, ierr} {
			if err == nil {
				t.Errorf("%s accepted", base)
				continue
			}
			if strings.Contains(err.Error(), basePassword) || strings.Contains(err.Error(), "Hd2n") {
				t.Errorf("the error shows the password: %v", err)
			}
		}
	}
}

// The errors of calls to a base URL with credentials never show the
// password: nothing listening, or an HTTP error status.
func TestCallErrorsHideThePassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Error(w, "no", http.StatusInternalServerError)
	})
	for _, hostport := range []string{closed, strings.TrimPrefix(srv.URL, "http://")} {
		base := "http://user:" + basePassword + "@" + hostport
		vmaas := newVMaaS(t, base, clients.VMaaSOptions{MaxAttempts: 1})
		_, verr := vmaas.Updates(context.Background(), sampleRequest())
		inventory := newInventory(t, base, clients.InventoryOptions{MaxAttempts: 1})
		_, ierr := inventory.SystemProfile(context.Background(), hostID)
		for _, err := range []error{verr, ierr} {
			if err == nil {
				t.Fatalf("a call to %s succeeded", hostport)
			}
			if strings.Contains(err.Error(), basePassword) || !strings.Contains(err.Error(), hostport) {
				t.Errorf("want the address without the password: %v", err)
			}
		}
	}
}
