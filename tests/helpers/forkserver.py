"""A pre-imported parent for the tests' train.py runs.

A run of `python experiments/train.py ...` spends ~6 s of one core importing torch, transformers'
GPT-Neo and Hydra before it does anything; the suite starts a few hundred of them on 2 cores. This
server imports those modules once, then forks a fresh child for each run, which executes train.py as
`__main__` with the run's argv, environment, working directory and stdout/stderr, and exits with its
exit code: the same entry point and the same code path, without the start-up.

What a fork cannot give is a fresh interpreter: modules that read environment variables when they
are imported (Hugging Face's offline switches, torch's and OpenMP's settings, PYTHONPATH) keep the
values the server started with. So `run` answers None when a run's environment differs from the
server's in any of those, and the caller starts a real process instead (tests/helpers/runs.py).

Server: `python tests/helpers/forkserver.py SOCKET` (one per pytest worker, ended with the session).
Protocol, per connection: the client sends a JSON request with its stdout and stderr file
descriptors (SCM_RIGHTS); the server forks a handler, which forks the run and answers one line
`{"pid": N}`, then, when the run has ended, `{"returncode": R}` (negative: killed by that signal).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

# What a run imports before its first step (measured with python -X importtime), heaviest first.
PRELOAD = (
    "torch",
    "torch.distributed",
    "torch.distributed.optim",
    "torch.multiprocessing",
    "transformers",
    "transformers.models.gpt_neo.modeling_gpt_neo",
    "transformers.convert_slow_tokenizer",
    "tokenizers.trainers",
    "hydra",
    "hydra._internal.utils",
    "hydra._internal.hydra",
    "omegaconf",
    "acco.config.schema",
    "acco.config.validate",
    "acco.harness.entry",
    "acco.harness.run.worker",
    "acco.harness.run.supervise",
    "acco.harness.run.disk",
    "acco.runtime.disk",
    "acco.models",
    "acco.tasks.lm",
    "acco.harness.run.preflight",
    "acco.data.sources",
    "acco.train.memory",
    "acco.evaluation",
    "acco.harness.testbed.emulate",
    "acco.train.trainer",
    "tabulate",
)

# Environment variables some module reads once, when it is imported: a run whose values differ
# cannot be forked from the server.
IMPORT_TIME_ENV = ("HF_", "HUGGINGFACE", "TRANSFORMERS", "DATASETS", "TOKENIZERS", "TORCH", "PYTORCH", "OMP_",
                   "MKL_", "CUDA", "NCCL", "GLOO", "PYTHON", "TQDM", "HYDRA",
                   "ACCO_METHODS")  # fmt: skip


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV)}


# ---------------------------------------------------------------- server


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # as the interpreter does with sys.exit("message")
    return 1


def _run(request: dict, out_fd: int, err_fd: int) -> None:
    """The forked run: become `python SCRIPT ARGS...` and never return."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group, so a timeout can end the run and its workers together
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        script = request["script"]
        sys.argv = [script, *request["args"]]
        sys.path[0] = os.path.dirname(script)  # as for `python SCRIPT`
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        # what the interpreter does on its way out: wait for non-daemon threads, run atexit handlers
        import atexit
        import threading

        try:
            threading._shutdown()  # type: ignore[attr-defined]
        finally:
            atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _handle(conn: socket.socket) -> None:
    """The handler (a child of the server): start the run, report its pid, then its exit status."""
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _run(request, *fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def serve(path: str) -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the run imports it itself
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    listener.settimeout(1.0)
    print("ready", flush=True)
    while os.getppid() == parent:  # the pytest worker that started it is gone: so is the server
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # reap finished handlers
        except ChildProcessError:
            pass
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _handle(conn)
        conn.close()


# ---------------------------------------------------------------- client


class ForkServer:
    def __init__(self, path: str, env: dict[str, str]):
        self.path = path
        self.env = import_time_env(env)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), path], env=env, stdout=subprocess.PIPE, text=True
        )
        if self.proc.stdout is None or self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the test fork server did not start (exit {self.proc.wait()})")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()

    def run(
        self, script: str, args: list[str], cwd: str, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess | None:
        """`python SCRIPT ARGS` forked from the server, as subprocess.run(capture_output=True,
        text=True) would return it; None when the environment rules that out (see the module)."""
        if import_time_env(env) != self.env or self.proc.poll() is not None:
            return None
        import tempfile

        argv = [sys.executable, script, *args]
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(self.path)
                request = {"script": script, "args": args, "cwd": cwd, "env": env}
                socket.send_fds(conn, [json.dumps(request).encode()], [out.fileno(), err.fileno()])
                reply = conn.makefile("r")
                pid = json.loads(reply.readline())["pid"]
                conn.settimeout(timeout)
                started = time.monotonic()
                try:
                    line = reply.readline()
                except TimeoutError:
                    line = ""
                if not line:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    raise subprocess.TimeoutExpired(argv, time.monotonic() - started)
                returncode = json.loads(line)["returncode"]
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


if __name__ == "__main__":
    serve(sys.argv[1])
