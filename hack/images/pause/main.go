// Command pause is the real node's pod sandbox ("pause") process: it holds a
// pod's namespaces and waits to be stopped. No image can be pulled from
// outside here, so `make images` builds this one as trellis-pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
