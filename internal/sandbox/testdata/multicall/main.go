// Command multicall is a multi-call binary as busybox is: it picks what
// it does by the name it was started by (argv[0]'s last element). Its one
// applet, readmem, tries its parent's memory and environment and says
// whether it could, and by which name it ran.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

func main() {
	switch filepath.Base(os.Args[0]) {
	case "readmem":
		ppid := strconv.Itoa(os.Getppid())
		for _, f := range []string{"mem", "environ"} {
			ok := "no"
			if file, err := os.Open("/proc/" + ppid + "/" + f); err == nil {
				file.Close()
				ok = "yes"
			}
			fmt.Println("applet " + f + " " + ok)
		}
		fmt.Println("applet argv0 " + os.Args[0])
	default:
		fmt.Println("no applet " + os.Args[0])
		os.Exit(127)
	}
}
