# A POSIX probe of one directory (argv[1]): every behaviour a program relies on that issue 25 names,
# each check printed as "ok" or what it saw instead, as one JSON object. Run by fuse-posix.test.ts on
# a real kernel FUSE mount (both transports) and on a plain directory, which must pass it too.
import errno, json, mmap, os, subprocess, sys

top = sys.argv[1]
paths_transport = len(sys.argv) > 2 and sys.argv[2] == "paths"
out = {}


def check(name):
    def run(fn):
        try:
            got = fn()
            out[name] = "ok" if got is None else str(got)
        except Exception as e:  # noqa: BLE001 - every failure is reported, never raised
            out[name] = f"raised {type(e).__name__}: {e}"
        return fn
    return run


def p(*parts):
    return os.path.join(top, *parts)


def fails_with(code, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return None if e.errno == code else f"{errno.errorcode.get(e.errno, e.errno)} instead of {errno.errorcode[code]}"
    return f"succeeded instead of {errno.errorcode[code]}"


def write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


@check("st_blocks from the size")
def _():
    write(p("blocks"), b"x" * 10000)
    s = os.stat(p("blocks"))
    if s.st_blocks * 512 < 10000:
        return f"st_blocks {s.st_blocks} for 10000 bytes"


@check("ls -a lists . and ..")
def _():
    os.mkdir(p("dots"))
    write(p("dots", "f"), b"")
    names = subprocess.run(["ls", "-a", p("dots")], capture_output=True, text=True, check=True).stdout.split()
    if names[:2] != [".", ".."]:
        return f"ls -a gave {names}"


@check("directory link count is 2 + subdirectories")
def _():
    os.makedirs(p("links", "a"))
    os.mkdir(p("links", "b"))
    os.listdir(p("links"))
    n = os.stat(p("links")).st_nlink
    if n != 4:
        return f"nlink {n}"


@check("utime to the nanosecond")
def _():
    write(p("times"), b"t")
    os.utime(p("times"), ns=(1_600_000_000_123_456_789, 1_500_000_000_987_654_321))
    s = os.stat(p("times"))
    if (s.st_atime_ns, s.st_mtime_ns) != (1_600_000_000_123_456_789, 1_500_000_000_987_654_321):
        return f"times {s.st_atime_ns} {s.st_mtime_ns}"


@check("touch -m changes the modification time alone")
def _():
    write(p("touchm"), b"t")
    os.utime(p("touchm"), ns=(1_600_000_000_000_000_001, 1_600_000_000_000_000_002))
    subprocess.run(["touch", "-m", "-d", "@1400000000.5", p("touchm")], check=True)
    s = os.stat(p("touchm"))
    if (s.st_atime_ns, s.st_mtime_ns) != (1_600_000_000_000_000_001, 1_400_000_000_500_000_000):
        return f"times {s.st_atime_ns} {s.st_mtime_ns}"


@check("modification time moves on after a write")
def _():
    write(p("mtime"), b"one")
    os.utime(p("mtime"), ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    write(p("mtime"), b"two, longer", "ab")
    s = os.stat(p("mtime"))
    if s.st_mtime_ns <= 1_000_000_000_000_000_000:
        return f"mtime {s.st_mtime_ns} after the write"


@check("rmdir of a non-empty directory: ENOTEMPTY")
def _():
    os.makedirs(p("full", "inner"))
    return fails_with(errno.ENOTEMPTY, os.rmdir, p("full"))


@check("rename over a non-empty directory: ENOTEMPTY")
def _():
    os.mkdir(p("src-dir"))
    os.makedirs(p("dst-dir", "x"))
    return fails_with(errno.ENOTEMPTY, os.rename, p("src-dir"), p("dst-dir"))


@check("mkdir of an existing name: EEXIST")
def _():
    os.mkdir(p("exists"))
    return fails_with(errno.EEXIST, os.mkdir, p("exists"))


@check("O_CREAT|O_EXCL of an existing file: EEXIST")
def _():
    write(p("excl"), b"")
    return fails_with(errno.EEXIST, os.open, p("excl"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)


@check("a file as a directory: ENOTDIR")
def _():
    write(p("plain"), b"")
    return fails_with(errno.ENOTDIR, os.open, p("plain", "x"), os.O_RDONLY) or fails_with(errno.ENOTDIR, os.rmdir, p("plain"))


@check("a directory as a file: EISDIR")
def _():
    os.mkdir(p("isdir"))
    write(p("isfile"), b"")
    return (
        fails_with(errno.EISDIR, os.open, p("isdir"), os.O_WRONLY)
        or fails_with(errno.EISDIR, os.unlink, p("isdir"))
        or fails_with(errno.EISDIR, os.rename, p("isfile"), p("isdir"))
    )


@check("a 256-byte name: ENAMETOOLONG")
def _():
    name = "n" * 256
    return fails_with(errno.ENAMETOOLONG, os.open, p(name), os.O_CREAT | os.O_WRONLY) or fails_with(errno.ENAMETOOLONG, os.mkdir, p(name)) or fails_with(errno.ENAMETOOLONG, os.stat, p(name))


@check("a 255-byte name works")
def _():
    write(p("m" * 255), b"ok")
    if open(p("m" * 255), "rb").read() != b"ok":
        return "read back differs"


@check("another user opening a 0600 file: EACCES")
def _():
    if paths_transport:
        return None  # modes are the proxy's own there (0644): nothing to refuse
    write(p("private"), b"s")
    os.chmod(p("private"), 0o600)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", p("private")], capture_output=True, text=True)
    if r.returncode == 0 or "Permission denied" not in r.stderr:
        return f"cat as nobody: {r.returncode} {r.stderr.strip()}"


@check("shared mmap: written through the map, read back by read(2)")
def _():
    write(p("mapped"), b"\0" * 8192)
    fd = os.open(p("mapped"), os.O_RDWR)
    try:
        m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m[4096:4101] = b"hello"
        m.flush()
        m.close()
    finally:
        os.close(fd)
    data = open(p("mapped"), "rb").read()
    if data[4096:4101] != b"hello" or len(data) != 8192:
        return f"read back {data[4096:4101]!r}, {len(data)} bytes"


@check("sequential write of 12 MiB in 1 MiB pieces, read back in 4 KiB pieces")
def _():
    block = bytes(range(256)) * 4096
    with open(p("big"), "wb") as f:
        for i in range(12):
            f.write(block[i:] + block[:i])
    with open(p("big"), "rb") as f:
        for i in range(12):
            want = block[i:] + block[:i]
            got = b"".join(f.read(4096) for _ in range(256))
            if got != want:
                return f"piece {i} differs"
    if os.stat(p("big")).st_size != 12 << 20:
        return f"size {os.stat(p('big')).st_size}"


@check("truncate, pwrite past the end, read of the hole")
def _():
    write(p("holes"), b"abc")
    os.truncate(p("holes"), 1)
    fd = os.open(p("holes"), os.O_RDWR)
    try:
        os.pwrite(fd, b"z", 5)
    finally:
        os.close(fd)
    data = open(p("holes"), "rb").read()
    if data != b"a\0\0\0\0z":
        return f"read {data!r}"


@check("symbolic link: refused clearly")
def _():
    return fails_with(errno.ENOSYS, os.symlink, "target", p("a-link"))


@check("hard link: refused clearly")
def _():
    write(p("linked"), b"")
    return fails_with(errno.EPERM, os.link, p("linked"), p("hard-link"))


@check("FIFO: refused clearly")
def _():
    return fails_with(errno.ENOSYS, os.mkfifo, p("a-fifo"))


json.dump(out, sys.stdout)
