"""osc_runner.py - runs the real `openstack` CLI without paying Python's
start-up for every command.

/usr/bin/openstack is `sys.exit(openstackclient.shell.main())`; most of the
1-2 s a command takes on this machine's kind is importing the client
libraries and their ~1,000 command plugins. The runner imports them once
(every `openstack.*` entry point), then forks a child per command, so each
command still starts from the same pristine interpreter state, runs the same
`openstackclient.shell.main(argv)` with its own environment, its own
terminal on stdin and its own stdout/stderr files, and exits with the CLI's
exit status. Nothing of one command survives into the next.

Server: `python3 osc_runner.py SOCKET` (the e2e conftest starts one per
pytest worker). Protocol, one connection per command: the client sends one
JSON line {argv, env, cwd, stdin, stdout, stderr} (the last three are paths:
the pty slave and two files); the server answers "pid N\n" at once and
"rc N\n" when the command ended. An EOF without "rc" means the child died.

Client: run(argv, env, timeout) -> (rc, stdout, stderr)."""
import importlib.metadata
import json
import os
import pty
import signal
import socket
import subprocess
import sys
import tempfile

PYTHON = "/usr/bin/python3"


def _warm():
    """Imports every module the CLI may load, so forked children find them
    in sys.modules. A plugin that fails to import is left to fail in the
    child exactly as it would in a fresh /usr/bin/openstack."""
    import openstackclient.shell  # noqa: F401
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group.startswith(("openstack.", "keystoneauth1.plugin")):
                try:
                    ep.load()
                except Exception:  # noqa: BLE001 - see the docstring
                    pass


def _child(conn):
    """Runs one command in this forked child; never returns."""
    rc = 1
    try:
        f = conn.makefile("rb")
        req = json.loads(f.readline())
        conn.sendall(b"pid %d\n" % os.getpid())
        for fd, path, flags in ((0, req["stdin"], os.O_RDWR),
                                (1, req["stdout"], os.O_WRONLY | os.O_TRUNC),
                                (2, req["stderr"], os.O_WRONLY | os.O_TRUNC)):
            nfd = os.open(path, flags)
            os.dup2(nfd, fd)
            os.close(nfd)
        os.chdir(req.get("cwd") or "/")
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = ["/usr/bin/openstack"] + req["argv"]
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from openstackclient.shell import main
        try:
            rc = main(req["argv"])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        rc = rc if isinstance(rc, int) else 0
    except BaseException:  # noqa: BLE001 - the traceback goes to the command's stderr
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        try:
            conn.sendall(b"rc %d\n" % (rc & 0xff))
        except OSError:
            pass
        os._exit(rc & 0xff)


def serve(path):
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            _child(conn)
        conn.close()


class Runner:
    """A warm runner process for this (pytest worker) process."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="osc-runner-")
        self.path = os.path.join(self.dir, "sock")
        # the runner's own stderr (warnings while importing) goes to a file:
        # each command's stderr is its own
        self.log = os.path.join(self.dir, "runner.log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([PYTHON, os.path.abspath(__file__), self.path],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log,
                                         env=dict(os.environ, PATH="/usr/bin:/bin:/usr/sbin:/sbin"))
        if self.proc.stdout.readline().strip() != b"ready":
            with open(self.log, errors="replace") as log:
                raise RuntimeError("the openstack CLI runner did not start: " + log.read()[-2000:])

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def run(self, argv, env, timeout):
        """Runs `openstack ARGV` with env; returns (rc, stdout, stderr) as
        text. Raises subprocess.TimeoutExpired after timeout seconds (the
        command is killed), as subprocess.run does."""
        master, slave = pty.openpty()
        out = tempfile.TemporaryFile(dir=self.dir)
        err = tempfile.TemporaryFile(dir=self.dir)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = None
        try:
            s.settimeout(timeout)
            s.connect(self.path)
            req = {"argv": list(argv), "env": env, "cwd": os.getcwd(),
                   "stdin": os.ttyname(slave),
                   "stdout": "/proc/%d/fd/%d" % (os.getpid(), out.fileno()),
                   "stderr": "/proc/%d/fd/%d" % (os.getpid(), err.fileno())}
            s.sendall(json.dumps(req).encode() + b"\n")
            f = s.makefile("rb")
            try:
                line = f.readline()
                pid = int(line.split()[1])
                line = f.readline()
            except socket.timeout:
                if pid:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                raise subprocess.TimeoutExpired(["openstack"] + list(argv), timeout)
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
            if not line.startswith(b"rc "):
                return -9, stdout, stderr + "\n(openstack CLI child died)"
            return int(line.split()[1]), stdout, stderr
        finally:
            s.close()
            out.close()
            err.close()
            os.close(master)
            os.close(slave)


if __name__ == "__main__":
    serve(sys.argv[1])
