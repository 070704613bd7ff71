#!/usr/bin/env python3
"""pty.py: a person at a terminal, for the tests.

Runs an interactive bash (bash --norc --noprofile --noediting -i) on a new
pseudo-terminal, as the leader of a new session whose controlling terminal
that is, so job control works as in a terminal window: the shell puts each
job in a process group of its own and gives it the terminal, Ctrl-C, Ctrl-\\
and Ctrl-Z go to the terminal's foreground group, and a stopped job makes
the shell say "Stopped". Then it plays a script, given as arguments:

    pty.py [--timeout SECS] [--log FILE] [--pidfile FILE] [--] STEP...

    line TEXT      type TEXT and Enter
    send TEXT      type TEXT as it is
    key ^X         a control key: ^C, ^Z, ^\\, ^D, ...
    expect REGEX   wait for REGEX (Python re, multiline) in the output that
                   no earlier expect consumed; consumes up to its end
    prompt         wait for the shell's next prompt ("[pty]> ")
    sleep SECS     wait, reading the output meanwhile
    waitfile PATH  wait for PATH to exist (how a test says "go on")
    timeout SECS   the limit of every later wait (default: --timeout, 20)

Before the first step it waits for the first prompt. After the last step
it hangs up (closes the terminal: the shell and its jobs get SIGHUP), and
the shell is killed if it is still there 5 s later.

The transcript is what the terminal showed, carriage returns left out;
it goes to FILE as it comes (--log) and to stdout at the end. --pidfile
gets the shell's pid, which is also the session's id (pgrep -s).

Exit status: 0 when every step is done; 1 when a wait timed out or the
terminal was hung up before its text came (stderr says which step); 2 for
a usage error; 128+N when pty.py got signal N (TERM, INT, HUP).

The terminal echoes what is typed, so an expect also sees the command
line: expect text that only the program prints (type `echo "o""k"`, expect
`ok`). Output is read all the time, so a job writing to the terminal never
blocks on a full buffer.
"""
import os
import re
import select
import signal
import sys
import termios
import time

PROMPT = "[pty]> "


class Failed(Exception):
    pass


class Terminal:
    def __init__(self, log):
        self.buf = ""  # everything shown, \r removed
        self.pos = 0  # consumed by expects up to here
        self.log = open(log, "a") if log else None
        self.eof = False
        env = dict(os.environ)
        for var in ("PROMPT_COMMAND", "PS0", "BASH_ENV", "ENV", "HISTFILE"):
            env.pop(var, None)
        env.update(PS1=PROMPT, PS2="", TERM="dumb", HISTFILE="/dev/null")
        # forkpty: setsid, then the slave becomes the controlling terminal.
        # (Not the pty module: this file's name would shadow it.)
        self.pid, self.fd = os.forkpty()
        if self.pid == 0:
            try:
                # As a terminal window starts its shell: no signal ignored
                # or blocked, whatever ours were (a shell without job
                # control starts its background commands with SIGINT and
                # SIGQUIT ignored, and Python ignores SIGPIPE), since
                # ignored ones stay ignored across exec.
                for sig in signal.valid_signals():
                    if sig not in (signal.SIGKILL, signal.SIGSTOP) and sig < signal.SIGRTMIN:
                        signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                os.execvpe("bash", ["bash", "--norc", "--noprofile", "--noediting", "-i"], env)
            finally:
                os._exit(127)
        if hasattr(termios, "tcsetwinsize"):
            termios.tcsetwinsize(self.fd, (24, 200))

    def read(self, until):
        """Takes what the terminal shows, waiting until `until` at most."""
        if self.eof:
            time.sleep(max(0.0, min(until - time.monotonic(), 0.05)))
            return
        ready, _, _ = select.select([self.fd], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: nobody has the terminal open any more
            data = b""
        if not data:
            self.eof = True
            return
        text = data.decode("utf-8", "replace").replace("\r", "")
        self.buf += text
        if self.log:
            self.log.write(text)
            self.log.flush()

    def wait(self, what, done, timeout):
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() >= deadline:
                raise Failed("%s: not seen within %g s" % (what, timeout))
            self.read(min(deadline, time.monotonic() + 0.05))

    def expect(self, regex, timeout):
        rx = re.compile(regex, re.M)

        def found():
            m = rx.search(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return True
            if self.eof:
                raise Failed("expect %r: the terminal was hung up first" % regex)
            return False

        self.wait("expect %r" % regex, found, timeout)

    def type(self, text):
        data = text.encode()
        while data:
            data = data[os.write(self.fd, data):]

    def hang_up(self):
        """Closes the terminal; the shell gets SIGHUP and passes it on to
        its jobs. Returns once the shell has gone (killed after 5 s)."""
        end = time.monotonic() + 0.2
        while not self.eof and time.monotonic() < end:
            self.read(end)
        os.close(self.fd)
        self.eof = True
        end = time.monotonic() + 5
        while time.monotonic() < end:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                return
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def control_key(name):
    if len(name) != 2 or name[0] != "^":
        raise Failed("key %r: not a control key such as ^C" % name)
    return chr(0x7F if name[1] == "?" else ord(name[1].upper()) & 0x1F)


def on_signal(sig, _frame):
    raise SystemExit(128 + sig)


def main(argv):
    timeout, log, pidfile = 20.0, None, None
    while argv and argv[0].startswith("--"):
        opt = argv.pop(0)
        if opt == "--":
            break
        if not argv:
            return usage("%s needs a value" % opt)
        if opt == "--timeout":
            timeout = float(argv.pop(0))
        elif opt == "--log":
            log = argv.pop(0)
        elif opt == "--pidfile":
            pidfile = argv.pop(0)
        else:
            return usage("unknown option %s" % opt)
    steps = []
    while argv:
        verb = argv.pop(0)
        if verb == "prompt":
            steps.append((verb, None))
        elif verb in ("line", "send", "key", "expect", "sleep", "waitfile", "timeout") and argv:
            steps.append((verb, argv.pop(0)))
        else:
            return usage("bad step %r" % verb)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    term = Terminal(log)
    status = 0
    step = "the first prompt"
    try:
        if pidfile:
            with open(pidfile + ".tmp", "w") as f:
                f.write("%d\n" % term.pid)
            os.rename(pidfile + ".tmp", pidfile)
        term.expect(re.escape(PROMPT), timeout)
        for i, (verb, arg) in enumerate(steps, 1):
            step = "step %d (%s%s)" % (i, verb, "" if arg is None else " %r" % arg)
            if verb == "line":
                term.type(arg + "\r")
            elif verb == "send":
                term.type(arg)
            elif verb == "key":
                term.type(control_key(arg))
            elif verb == "expect":
                term.expect(arg, timeout)
            elif verb == "prompt":
                term.expect(re.escape(PROMPT), timeout)
            elif verb == "sleep":
                end = time.monotonic() + float(arg)
                term.wait("sleep", lambda: time.monotonic() >= end, float(arg) + 1)
            elif verb == "waitfile":
                term.wait("file %s" % arg, lambda: os.path.exists(arg), timeout)
            elif verb == "timeout":
                timeout = float(arg)
    except Failed as e:
        sys.stderr.write("pty.py: %s: %s\n" % (step, e))
        status = 1
    except SystemExit as e:
        sys.stderr.write("pty.py: stopped by a signal during %s\n" % step)
        status = e.code
    finally:
        # no signal may cut the hang-up short
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        term.hang_up()
        sys.stdout.write(term.buf)
        sys.stdout.flush()
    return status


def usage(message):
    sys.stderr.write("pty.py: %s\nusage: pty.py [--timeout SECS] [--log FILE] "
                     "[--pidfile FILE] [--] STEP...\n" % message)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
