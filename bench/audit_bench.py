"""What ``fsm audit`` costs on long logs: seconds, records per second and peak memory.

Logs of 45,000, 180,000 and 1,000,000 records (``AUDIT_BENCH_SIZES``, comma-separated,
overrides them) are written by :func:`support.audit_logs.synthetic_lines`: sessions of
interleaved tool calls (confirmations presented, answered and submitted, some streams lost,
resumed and replayed; progress-only calls; requests the server cancels; origin-less
requests on the standalone GET stream), a lost session and a new one every 300
interactions, and one violation at the very end (a replayed request presented again, P2),
so the audit judges every record and exits 1 on the last line.

Each size is audited by the command itself, ``python -m fsm audit LOG`` (default
``--retain``), in a child process of its own: the seconds are its wall-clock time from
start to exit (interpreter start and imports included, about 0.2 s), the peak RSS is the
child's own (``ru_maxrss`` from ``os.wait4``), so no size inherits another's memory. An
empty-log child (header only) gives the interpreter's baseline. Figures recorded:
``audit_<size>_records_per_s`` and ``audit_<size>_peak_rss_mb`` for each size, and
``audit_baseline_rss_mb``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.results import record, table
from support.audit_logs import synthetic_lines

ROOT = Path(__file__).resolve().parents[1]
SIZES = (45_000, 180_000, 1_000_000)
TARGET_1M_S = 60.0


def sizes() -> tuple[int, ...]:
    """The sizes to measure: ``AUDIT_BENCH_SIZES`` or :data:`SIZES`."""
    value = os.environ.get("AUDIT_BENCH_SIZES", "")
    return tuple(int(v) for v in value.split(",") if v.strip()) or SIZES


def write_log(path: Path, records: int) -> None:
    """A synthetic log of ``records`` records (plus a header), its last one a P2;
    ``records=0`` writes the header alone."""
    with path.open("w", encoding="utf-8") as fh:
        lines = synthetic_lines(records, violation=True) if records else synthetic_lines(0)
        for line in lines:
            fh.write(line + "\n")


def audit_in_child(path: Path) -> tuple[int, float, float, float]:
    """``python -m fsm audit path`` in a child: its exit code, wall-clock seconds, CPU
    seconds (user and system) and peak RSS in MiB."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsm", "audit", str(path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return proc.returncode, seconds, cpu, usage.ru_maxrss / 1024  # ru_maxrss: KiB on Linux


def label(records: int) -> str:
    """``45k``, ``1m``: a size as figure names spell it."""
    if records % 1_000_000 == 0:
        return f"{records // 1_000_000}m"
    if records % 1_000 == 0:
        return f"{records // 1_000}k"
    return str(records)


def main() -> None:
    rows: list[tuple[object, ...]] = []
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        empty = Path(tmp) / "empty.jsonl"
        write_log(empty, 0)
        code, _, _, baseline = audit_in_child(empty)
        assert code == 2, code  # an empty log proves nothing
        record("audit_baseline_rss_mb", round(baseline, 1), "MiB")
        for records in sizes():
            log = Path(tmp) / f"{records}.jsonl"
            write_log(log, records)
            megabytes = log.stat().st_size / 2**20
            code, seconds, cpu, rss = audit_in_child(log)
            log.unlink()
            assert code == 1, f"the log's last record is a violation, got exit {code}"
            rate = records / seconds
            name = label(records)
            record(f"audit_{name}_records_per_s", round(rate), "records/s")
            record(f"audit_{name}_peak_rss_mb", round(rss, 1), "MiB")
            target = ""
            if records == 1_000_000:
                target = "ok" if seconds < TARGET_1M_S else "OVER"
            rows.append((records, megabytes, seconds, cpu, rate, rss, target))
    table(
        [("empty log (interpreter, imports)", "-", "-", "-", "-", baseline, ""), *rows],
        header=(
            "records",
            "log MiB",
            "seconds",
            "CPU s",
            "records/s",
            "peak RSS MiB",
            "1M < 60 s",
        ),
    )


if __name__ == "__main__":
    main()
