# Swaps two paths for each other in a tight loop with renameat2(RENAME_EXCHANGE) until killed: the
# race a hostile program runs against a check-then-use by name. Usage: swap-loop.py A B
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = (os.fsencode(p) for p in sys.argv[1:3])
# Killed with its parent (PR_SET_PDEATHSIG): a test runner killed mid-test would leave it spinning
# on a core for good, slowing every later run on the machine.
parent = os.getppid()
libc.prctl(1, 9, 0, 0, 0)
if os.getppid() != parent:
    sys.exit(0)
sys.stdout.write("swapping\n"); sys.stdout.flush()
while True:
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
