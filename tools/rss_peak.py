#!/usr/bin/env python3
"""rss_peak.py - run a command and account for its peak resident memory.

Samples /proc/PID/smaps every 2 ms, keeps the sample with the largest total
Rss and prints it per mapping (files by path, anonymous mappings by address
range and size), largest first.  Used for docs/speed.md's accounting of
`needle bench`'s peak against file + KV budget + 1 MiB.

usage: tools/rss_peak.py COMMAND [ARGS...]
"""
import re
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    best, best_text = 0, ""
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/smaps") as f:
                text = f.read()
        except OSError:
            break
        rss = sum(int(x) for x in re.findall(r"^Rss:\s+(\d+)", text, re.M))
        if rss > best:
            best, best_text = rss, text
        time.sleep(0.002)
    sys.stdout.write(p.stdout.read().decode(errors="replace"))
    print(f"peak sampled Rss: {best} KiB ({best / 1024:.2f} MiB)")
    per = {}
    name = None
    for line in best_text.splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else f"[anon {parts[0]} {(hi - lo) >> 10} KiB]"
        elif line.startswith("Rss:") and name is not None:
            per[name] = per.get(name, 0) + int(line.split()[1])
    for k, v in sorted(per.items(), key=lambda kv: -kv[1]):
        if v:
            print(f"{v:8d} KiB  {k}")


if __name__ == "__main__":
    main()
