package env

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the state column value of a listening socket in /proc/net/tcp{,6}.
const tcpListen = "0A"

// childPIDs returns the processes whose parent is this test binary.
func childPIDs() ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("failed to list /proc: %w", err)
	}
	self := os.Getpid()
	var pids []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // The process exited meanwhile.
		}
		// Fields after the parenthesised command name: state, ppid, ...
		rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(self) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// socketInodes returns the inodes of the sockets process pid holds open.
func socketInodes(pid int) (map[string]bool, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	return inodes, nil
}

// listeningPorts returns the local ports in LISTEN state, by socket inode, from /proc/net/tcp
// and /proc/net/tcp6 (this network namespace).
func listeningPorts() (map[string]int, error) {
	ports := map[string]int{}
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := readListening(path, ports); err != nil {
			return nil, err
		}
	}
	return ports, nil
}

func readListening(path string, ports map[string]int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Scan() // Header.
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != tcpListen {
			continue
		}
		addr := fields[1]
		port, err := strconv.ParseInt(addr[strings.LastIndexByte(addr, ':')+1:], 16, 32)
		if err != nil {
			return fmt.Errorf("failed to parse local address %q in %s: %w", addr, path, err)
		}
		ports[fields[9]] = int(port)
	}
	return sc.Err()
}

// listeningPortsOf returns the ports processes pids listen on.
func listeningPortsOf(pids ...int) ([]int, error) {
	all, err := listeningPorts()
	if err != nil {
		return nil, err
	}
	var ports []int
	for _, pid := range pids {
		inodes, err := socketInodes(pid)
		if err != nil {
			return nil, err
		}
		for inode := range inodes {
			if port, ok := all[inode]; ok {
				ports = append(ports, port)
			}
		}
	}
	return ports, nil
}
