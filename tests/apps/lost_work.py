#!/usr/bin/env python3
"""No lost work, through the real `weft train`: interrupted runs keep their
checkpoint and resume bitwise identically, reruns resume, another run's
checkpoint is refused untouched, --keep keeps that many.

usage: lost_work.py WEFT DIR CASE [MPIRUN...]
  CASE: interrupt | keep | other_run | paths | schedule | mpi_interrupt (MPIRUN: the mpirun
  command line up to the process count, e.g. mpirun --oversubscribe -np)
Every process is waited on with a timeout; a failure prints what was seen.
"""
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys

TIMEOUT = 120  # seconds for any one weft run
STEPS = 200
MODEL = ["--layers", "2", "--width", "64", "--heads", "2", "--seq", "64", "--micro-batch", "4",
         "--dropout", "0.1", "--eval-every", "50", "--eval-batches", "1", "--log-every", "1",
         "--sample-tokens", "0", "--steps", str(STEPS)]


def fail(message, output=""):
    sys.stdout.write(output)
    sys.exit(f"FAILED: {message}")


def run(cmd, expect_rc=0, expect=None):
    """Runs cmd to its end; checks the exit status and the output."""
    p = subprocess.run(cmd, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=TIMEOUT)
    if p.returncode != expect_rc:
        fail(f"exit status {p.returncode}, expected {expect_rc}: {' '.join(cmd)}", p.stdout)
    if expect and not re.search(expect, p.stdout, re.S):
        fail(f"the output does not match {expect!r}: {' '.join(cmd)}", p.stdout)
    return p.stdout


def interrupt(cmd, at_step, sig, again=False, target=None):
    """Starts cmd and sends it `sig` after its progress line of step
    `at_step`; `again`: a second time once it says it is stopping (two signals
    sent at once may arrive as one). Returns (exit status, output).
    target(process) -> pid to signal (default: the process itself)."""
    p = subprocess.Popen(cmd, cwd=WORK, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    sent = False
    pid = None
    try:
        line_re = re.compile(rf"^step +{at_step}/")
        for line in p.stdout:
            out.append(line)
            if pid is None:
                pid = target(p) if target else p.pid
            if not sent and line_re.match(line):
                os.kill(pid, sig)
                sent = True
            elif sent and again and line.startswith("weft: stopping after this step"):
                os.kill(pid, sig)
                again = False
        rc = p.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        fail(f"still running after {TIMEOUT} s: {' '.join(cmd)}", "".join(out))
    text = "".join(out)
    if not sent:
        fail(f"no progress line for step {at_step}: {' '.join(cmd)}", text)
    return rc, text


def metrics_steps(name):
    lines = (WORK / name).read_text().splitlines()
    return [json.loads(line)["step"] for line in lines]


def losses(name):
    """"step":N,"loss":X of each line, as text: equal text is equal bits."""
    lines = (WORK / name).read_text().splitlines()
    return [re.search(r'"step":\d+,"loss":[^,]+', line).group(0) for line in lines]


def latest(ck):
    return (WORK / ck / "latest").read_text().strip()


def tree_sha256(path):
    out = {}
    for f in sorted(pathlib.Path(path).rglob("*")):
        if f.is_file():
            out[str(f.relative_to(path))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def stopped_at(text, ck):
    m = re.search(rf"\nstopped at step (\d+): checkpoint written to {ck}/step-(\d+)\n", text)
    if not m or int(m.group(1)) != int(m.group(2)):
        fail("no 'stopped at step N: checkpoint written to ...' line", text)
    return int(m.group(1))


def case_interrupt():
    run([WEFT, "train", *MODEL, "--tp", "2", "--metrics", "straight.jsonl"], expect="\ndone: ")
    cmd = [WEFT, "train", *MODEL, "--tp", "2", "--save", "ck", "--metrics", "run.jsonl"]

    # Ctrl-C with the default --save-every 0: a checkpoint of the step it stopped at.
    rc, text = interrupt(cmd, 3, signal.SIGINT)
    if rc != 130:
        fail(f"exit status {rc} after SIGINT, expected 130", text)
    n1 = stopped_at(text, "ck")
    if not 3 <= n1 < STEPS or latest("ck") != f"step-{n1:06d}":
        fail(f"stopped at step {n1}, latest {latest('ck')}", text)
    if metrics_steps("run.jsonl") != list(range(1, n1 + 1)):
        fail(f"run.jsonl holds steps {metrics_steps('run.jsonl')}, expected 1..{n1}", text)
    print(f"SIGINT after step 3: stopped at step {n1}, exit status 130")

    # The same command again resumes; SIGTERM stops it too (143).
    rc, text = interrupt(cmd, n1 + 3, signal.SIGTERM)
    if not re.search(rf"\nck holds a checkpoint of this run at step {n1}: resuming from it", text):
        fail("the rerun did not say it resumes", text)
    if rc != 143:
        fail(f"exit status {rc} after SIGTERM, expected 143", text)
    n2 = stopped_at(text, "ck")
    if metrics_steps("run.jsonl") != list(range(1, n2 + 1)):
        fail(f"run.jsonl holds steps {metrics_steps('run.jsonl')}, expected 1..{n2}", text)
    print(f"rerun resumed at {n1}; SIGTERM: stopped at step {n2}, exit status 143")

    # A second Ctrl-C during the step: it dies at once, the checkpoint of n2
    # stays whole. (When the step and its checkpoint were done before the
    # second signal came, that was an ordinary stop: try again from there.)
    for attempt in range(5):
        before = tree_sha256(WORK / "ck" / f"step-{n2:06d}")
        rc, text = interrupt(cmd, n2 + 3, signal.SIGINT, again=True)
        if rc != 130:
            break
        n2 = stopped_at(text, "ck")
        print(f"the second SIGINT came after the stop at step {n2}: again")
    if rc != -signal.SIGINT or "stopped at once" not in text:
        fail(f"exit status {rc} after two SIGINTs, expected death by SIGINT", text)
    if latest("ck") != f"step-{n2:06d}" or tree_sha256(WORK / "ck" / f"step-{n2:06d}") != before:
        fail(f"latest is {latest('ck')}; the checkpoint of step {n2} must be kept as it was", text)
    print(f"two SIGINTs: died at once, checkpoint of step {n2} intact")

    # The rerun drops the metrics lines past n2 and ends as the straight run did.
    text = run(cmd, expect=rf"resuming from it.*\ndone: {STEPS - n2} steps")
    steps = metrics_steps("run.jsonl")
    if steps != list(range(1, STEPS + 1)):
        fail(f"run.jsonl holds steps {steps}: each of 1..{STEPS} once expected", text)
    a, b = losses("straight.jsonl"), losses("run.jsonl")
    if a != b:
        diff = next(i for i in range(len(a)) if a[i] != b[i])
        fail(f"the interrupted run's losses differ from the straight run's: {a[diff]} vs {b[diff]}")
    print(f"resumed to {STEPS}: {STEPS} metrics lines, each step once, losses bitwise identical")


def case_keep():
    small = [*MODEL[:-1], "12"]
    run([WEFT, "train", *small, "--tp", "1", "--save", "kp", "--save-every", "3", "--keep", "2"],
        expect=r"step 12: checkpoint written to kp/step-000012")
    kept = sorted(p.name for p in (WORK / "kp").iterdir())
    if kept != ["latest", "step-000009", "step-000012"] or latest("kp") != "step-000012":
        fail(f"kp holds {kept}, expected latest, step-000009 and step-000012")
    # Both the directory (its latest) and a step directory load.
    run([WEFT, "eval", "--checkpoint", "kp", "--max-tokens", "512", "--json"], expect='"loss"')
    run([WEFT, "eval", "--checkpoint", "kp/step-000009", "--max-tokens", "512", "--json"],
        expect='"loss"')
    print("--keep 2: kp holds step-000009 and step-000012, latest step-000012")


def case_other_run():
    small = [*MODEL[:-1], "4"]
    run([WEFT, "train", *small, "--tp", "1", "--save", "other"], expect="written to other/")
    before = tree_sha256(WORK / "other")
    run([WEFT, "train", *small, "--tp", "1", "--seed", "7", "--save", "other"], expect_rc=2,
        expect=r"weft: error: --save other holds a checkpoint of another run "
               r"\(other/step-000004 at step 4: seed 1337 there, 7 here\): pass --resume other "
               r"to continue that run, --overwrite to replace it, or another --save directory\n$")
    run([WEFT, "train", *small, "--tp", "1", "--width", "32", "--save", "other"], expect_rc=2,
        expect=r"another run .*width 64 there, 32 here")
    if tree_sha256(WORK / "other") != before:
        fail("the other run's checkpoint changed")
    # The same run, finished: nothing to do, and it says what to pass.
    run([WEFT, "train", *small, "--tp", "1", "--save", "other"], expect_rc=2,
        expect=r"holds this run's checkpoint at step 4, which ends its --steps 4: pass a larger")
    if tree_sha256(WORK / "other") != before:
        fail("the finished run's checkpoint changed")
    print(f"{len(before)} files of another run's checkpoint unchanged (SHA-256)")
    # --overwrite replaces it: the new run's checkpoint alone remains.
    run([WEFT, "train", *small, "--tp", "1", "--seed", "7", "--steps", "2", "--save", "other",
         "--overwrite"], expect="written to other/step-000002")
    kept = sorted(p.name for p in (WORK / "other").iterdir())
    if kept != ["latest", "step-000002"]:
        fail(f"after --overwrite other holds {kept}")
    print("--overwrite: other holds the new run's step-000002 alone")


def case_paths():
    # Relative paths in a --config file are relative to the file; those a
    # checkpoint saved are relative to the checkpoint: resuming from another
    # working directory finds the data and writes where the run did.
    sub = WORK / "sub"
    sub.mkdir()
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    (sub / "corpus.txt").write_text(
        "".join(f"{words[i % 8]} {words[(i * 5) % 8]} {i}\n" for i in range(4000)))
    config = {"data": "corpus.txt", "save": "ck", "metrics": "m.jsonl", "steps": 6,
              "stop-at": 3, "tp": 1}
    small = [*MODEL[:-2]]
    (sub / "run.json").write_text(json.dumps(config))
    run([WEFT, "train", *small, "--config", "sub/run.json"],
        expect=r"data  sub/corpus.txt: .*step 3: checkpoint written to sub/ck/step-000003\n")
    if metrics_steps("sub/m.jsonl") != [1, 2, 3] or (WORK / "ck").exists():
        fail("the --config run did not write sub/m.jsonl and sub/ck")
    elsewhere = WORK / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run([WEFT, "train", "--resume", "../sub/ck"], cwd=elsewhere,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
    expect = (r"data  \.\./sub/corpus\.txt: .*\nfrom checkpoint \.\./sub/ck: [^\n]*data "
              r"\.\./sub/corpus\.txt, [^\n]*save \.\./sub/ck, [^\n]*metrics \.\./sub/m\.jsonl.*"
              r"\nstep 6: checkpoint written to \.\./sub/ck/step-000006\n")
    if p.returncode != 0 or not re.search(expect, p.stdout, re.S):
        fail(f"resuming from another directory: exit status {p.returncode}", p.stdout)
    if metrics_steps("sub/m.jsonl") != list(range(1, 7)) or latest("sub/ck") != "step-000006":
        fail(f"sub/m.jsonl holds {metrics_steps('sub/m.jsonl')}, latest {latest('sub/ck')}")
    print("paths: the --config file's and the checkpoint's relative paths resolved against them")


def case_schedule():
    small = [*MODEL[:-2], "--tp", "1", "--warmup", "0", "--lr", "1e-3", "--min-lr", "1e-4"]
    run([WEFT, "train", *small, "--steps", "4", "--save", "s", "--metrics", "s.jsonl"])

    def lrs(name):
        return [json.loads(line)["lr"] for line in (WORK / name).read_text().splitlines()]

    # Past the end of the saved schedule the rate stays at its floor.
    run([WEFT, "train", "--resume", "s", "--steps", "6"],
        expect=r"cosine over 4 steps to 0\.0001\).*\nschedule: the saved run's, over 4 steps "
               r"\(--reset-schedule spans --steps 6 instead\)\n")
    if lrs("s.jsonl")[3:] != [1e-4, 1e-4, 1e-4]:
        fail(f"lr after the resume: {lrs('s.jsonl')[3:]}, expected the floor 1e-4")
    run([WEFT, "train", "--resume", "s/step-000004", "--steps", "6", "--reset-schedule", "--save",
         "s2", "--metrics", "s2.jsonl"],
        expect=r"cosine to 0\.0001\).*\nschedule: spans --steps 6 \(--reset-schedule. the saved "
               r"run's spanned 4\)\n")
    reset = lrs("s2.jsonl")
    # The new cosine is above its floor at step 5 and reaches it at the last step, 6.
    if len(reset) != 2 or not reset[0] > 1e-4 or reset[1] != 1e-4:
        fail(f"lr of the reset schedule at steps 5, 6: {reset}: expected a cosine ending at 1e-4")
    print(f"schedule: kept (lr 1e-4 past step 4), reset (lr {reset[0]:.3g}, {reset[1]:.3g})")


def case_mpi_interrupt():
    # SIGTERM to rank 1 alone (as a batch system may deliver it): both ranks
    # stop after the same step and write one checkpoint together.
    # More steps: mpirun forwards the output with some delay.
    cmd = [*MPIRUN, "2", WEFT, "train", *MODEL, "--steps", "5000", "--tp", "2", "--save", "mck",
           "--metrics", "mpi.jsonl"]

    def rank1(p):
        # By the first line of output every rank runs: a child of mpirun.
        for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                env = (stat.parent / "environ").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if ppid == p.pid and b"OMPI_COMM_WORLD_RANK=1" in env:
                return int(stat.parent.name)
        fail("rank 1 of mpirun not found among its children")

    rc, text = interrupt(cmd, 3, signal.SIGTERM, target=rank1)
    n = stopped_at(text, "mck")
    if latest("mck") != f"step-{n:06d}" or metrics_steps("mpi.jsonl") != list(range(1, n + 1)):
        fail(f"stopped at {n}, latest {latest('mck')}, metrics {metrics_steps('mpi.jsonl')}", text)
    if rc == 0:
        fail("mpirun ended with status 0 after a stop", text)
    print(f"mpirun: SIGTERM to rank 1, both ranks stopped at step {n} with one checkpoint "
          f"(mpirun exit status {rc})")


if __name__ == "__main__":
    WEFT, WORK, CASE = os.path.abspath(sys.argv[1]), pathlib.Path(sys.argv[2]) / sys.argv[3], sys.argv[3]
    MPIRUN = sys.argv[4:]
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    {"interrupt": case_interrupt, "keep": case_keep, "other_run": case_other_run,
     "paths": case_paths, "schedule": case_schedule, "mpi_interrupt": case_mpi_interrupt}[CASE]()
    print(f"{CASE}: ok")
