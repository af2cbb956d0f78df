"""kill -9, SIGTERM and SIGINT during checkpoint writes (issues 21 and 34): `smelt train
--checkpoint` is killed at random moments while it writes a checkpoint, ROUNDS times, the
signals in turn (after SIGTERM or SIGINT no temporary of the killed writer may be left); the
checkpoint must always be the previous whole one or the new whole one, and resumable. Each round resumes from the checkpoint the last
kill left, waits for the writer's temporary file (<checkpoint>.tmp.<pid>.<n>) to appear and
kills the process a random 0-10 ms later (writing the 6 MB checkpoint takes a few ms here):
mid-write, during fsync, or just after the rename. Then a run that resumes with --epochs at the
checkpoint's epochs_done must load it (every field and the CRC are checked on load) and say
"resumed from ... after epoch N", N never going back. A last run resumes and trains on, which
also removes the killed writers' temporaries.
Usage: checkpoint_kill.py SMELT WORKDIR [ROUNDS=10] [SEED]"""
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

TRAIN = ["train", "--limit=512", "--batch=128"]


def run_to_end(smelt, checkpoint, epochs, resume):
    args = [smelt] + TRAIN + [f"--epochs={epochs}", f"--checkpoint={checkpoint}"]
    out = subprocess.run(args + (["--resume"] if resume else []), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


def temporaries(checkpoint):
    folder, name = os.path.split(checkpoint)
    return [f for f in os.listdir(folder) if f.startswith(name + ".tmp.")]


def epochs_done(checkpoint):
    with open(checkpoint, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        return int(json.loads(f.read(length))["__metadata__"]["epochs_done"])


def resumes(smelt, checkpoint):
    """The epoch the checkpoint resumes after, from a run that loads it and trains no further."""
    done = epochs_done(checkpoint)
    out = run_to_end(smelt, checkpoint, done, resume=True)
    found = re.search(r"resumed from .* after epoch (\d+)", out)
    assert found and int(found.group(1)) == done, out
    return done


def killed_round(smelt, checkpoint, rng, sig=signal.SIGKILL):
    """Starts a resumed run of many epochs and kills it with `sig` during a checkpoint write.
    SIGTERM and SIGINT are handled: the writer removes its temporary before it dies, so none
    is left (SIGKILL's are removed by the next save)."""
    before = set(temporaries(checkpoint))
    process = subprocess.Popen([smelt] + TRAIN + ["--epochs=100000", f"--checkpoint={checkpoint}",
                                                  "--resume"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        if set(temporaries(checkpoint)) - before:
            time.sleep(rng.uniform(0, 0.01))
            break
        time.sleep(0.0005)
    assert process.poll() is None, "the run ended before it wrote a checkpoint"
    process.send_signal(sig)
    process.wait()
    if sig != signal.SIGKILL:
        left = set(temporaries(checkpoint)) - before
        assert not left, f"{signal.Signals(sig).name} left {sorted(left)}"


def main(smelt, workdir, rounds="10", seed=None):
    rng = random.Random(int(seed) if seed else time.time_ns())
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    checkpoint = os.path.join(workdir, "ckpt.safetensors")
    run_to_end(smelt, checkpoint, 1, resume=False)
    last = 1
    for i in range(int(rounds)):
        sig = [signal.SIGKILL, signal.SIGTERM, signal.SIGINT][i % 3]
        killed_round(smelt, checkpoint, rng, sig)
        done = resumes(smelt, checkpoint)
        assert done >= last, f"round {i}: resumed after epoch {done}, an earlier one had {last}"
        last = done
        left = len(temporaries(checkpoint))
        print(f"round {i} ({signal.Signals(sig).name}): resumed after epoch {done}; {left} killed "
              "writers' temporaries left")
    # The last run resumes from what the last kill left and trains two more epochs to the end.
    final = run_to_end(smelt, checkpoint, last + 2, resume=True)
    found = re.search(r"resumed from .* after epoch (\d+)", final)
    assert found and int(found.group(1)) >= last, final
    assert not temporaries(checkpoint), temporaries(checkpoint)
    print(f"checkpoint kill OK: {rounds} rounds, resumed after epoch {found.group(1)} at the end")


if __name__ == "__main__":
    main(*sys.argv[1:])
