"""Files and setup-defined classes shared between the tests and the program, as in one
interpreter: the tests (in the judge process) work in the run's directory, and
the classes the setup defines are the program's names too. Each correct program's per-test
verdicts are compared with plain ``python``'s (``execrl.sandbox.differential.plain_verdict``);
the hostile cases check that a link, FIFO or directory swap the program plants reaches
nothing the program could not reach itself, hangs nothing past the limits, leaves nothing for
the next program, and never makes a failing program pass."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from execrl.problems import Problem
from execrl.sandbox import ExecutionLimits, Executor
from execrl.sandbox.differential import plain_verdict

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")

LIMITS = ExecutionLimits(timeout_s=2, memory_mb=512)


def problem(tests, setup=""):
    return Problem(id="p", prompt="p", test_type="assert", tests=tests, setup_code=setup)


@pytest.fixture(scope="module")
def ex():
    with Executor(workers=1, limits=LIMITS) as executor:
        if not executor.isolation.get("private_root"):
            pytest.skip("no private root: the judge keeps to its own directory")
        yield executor


def statuses(r) -> list[str]:
    return [o["status"] for o in r.test_outcomes]


def agrees_with_python(ex, prob, code):
    r = ex.run(prob, code)
    plain = plain_verdict(prob, code, LIMITS)
    return (r.status, statuses(r)) == (plain.status, plain.tests), (r.status, statuses(r), r.error_message,
                                                                     plain.status, plain.tests)


# ---- files in the working directory --------------------------------------------------------
SAVE = "def save(path, xs):\n    with open(path, 'w') as fh:\n        for x in xs:\n            fh.write(f'{x}\\n')\n"
COUNT = "def count_lines(path):\n    with open(path) as fh:\n        return sum(1 for _ in fh)\n"
FILE_CASES = {
    "test_writes_program_reads": (
        COUNT, ["with open('in.txt', 'w') as fh:\n    fh.write('a\\nb\\n')\nassert count_lines('in.txt') == 2"]),
    "program_writes_test_reads": (SAVE, ["save('out.txt', [1, 2])\nassert open('out.txt').read() == '1\\n2\\n'"]),
    "program_appends_to_the_tests_file": (
        "def log(path, line):\n    with open(path, 'a') as fh:\n        fh.write(line + '\\n')\n",
        ["open('log.txt', 'w').write('a\\n')\nlog('log.txt', 'b')\nassert open('log.txt').read() == 'a\\nb\\n'"]),
    "test_appends_to_the_programs_file": (
        SAVE + COUNT,
        ["save('x.txt', [1])\nwith open('x.txt', 'a') as fh:\n    fh.write('2\\n')\nassert count_lines('x.txt') == 2"]),
    "test_writes_into_the_programs_directory": (
        "import os\n\ndef prepare():\n    os.makedirs('out/sub')\n\ndef read(p):\n    return open(p).read()\n",
        ["prepare()\nopen('out/sub/a.txt', 'w').write('hi')\nassert read('out/sub/a.txt') == 'hi'"]),
    "program_writes_into_the_tests_directory": (
        SAVE, ["import os\nos.mkdir('d')\nsave('d/f.txt', [3])\nassert open('d/f.txt').read() == '3\\n'"]),
    "test_removes_the_programs_file": (
        SAVE + "import os\n\ndef exists(p):\n    return os.path.exists(p)\n",
        ["import os\nsave('t.txt', [])\nos.remove('t.txt')\nassert not exists('t.txt')"]),
    "program_renames_the_tests_file": (
        "import os\n\ndef move(a, b):\n    os.rename(a, b)\n",
        ["open('a.txt', 'w').write('x')\nmove('a.txt', 'b.txt')\nassert open('b.txt').read() == 'x'"]),
    "pathlib_and_json": (
        "import json\n\ndef load(path):\n    with open(path) as fh:\n        return json.load(fh)['n'] * 2\n",
        ["import json, pathlib\npathlib.Path('cfg.json').write_text(json.dumps({'n': 21}))\n"
         "assert load('cfg.json') == 42"]),
    "files_stay_between_tests": (
        SAVE + COUNT, ["save('keep.txt', [1, 2, 3])", "assert count_lines('keep.txt') == 3"]),
    "wrong_content_still_fails": (
        "def save(path, xs):\n    open(path, 'w').write(' '.join(map(str, xs)))\n",
        ["save('out.txt', [1, 2])\nassert open('out.txt').read() == '1\\n2\\n'", "assert True"]),
    "a_file_nobody_wrote_is_an_error": (COUNT, ["assert count_lines('none.txt') == 0"]),
}


@pytest.mark.parametrize("name", FILE_CASES)
def test_tests_and_the_program_share_their_files(ex, name):
    code, tests = FILE_CASES[name]
    ok, seen = agrees_with_python(ex, problem(tests), code)
    assert ok, (name, seen)


def test_the_next_program_finds_none_of_the_files(ex):
    """Files the tests wrote, through the program's links too (``/tmp``), are gone for the next
    program, like any file a run leaves."""
    code = "import os\n\ndef plant():\n    os.symlink('/tmp/planted', 'link.txt')\n"
    r = ex.run(problem(["plant()\nopen('link.txt', 'w').write('secret')\nopen('own.txt', 'w').write('x')\n"
                        "assert open('/tmp/planted').read() == 'secret'"]), code)
    assert r.status == "pass", r.error_message
    nothing_left(ex)


def nothing_left(ex):
    """The judge is unharmed and nothing is left: the next correct program passes, and neither
    it nor its tests see a file of the last one's (in the directory, ``/tmp`` or ``/dev/shm``).
    Besides the run's own directory, ``/tmp`` holds the interpreter's directories that live
    under it (a checkout and virtualenv under /tmp, bound into every fresh scratch mount)."""
    expected = {"run", *(Path(p).parts[2] for p in (sys.prefix, *sys.path) if p.startswith("/tmp/"))}
    probe = ("import os\n\ndef seen():\n    return os.listdir('.') + [n for d in ('/tmp', '/dev/shm')\n"
             f"                                 for n in os.listdir(d) if n not in {sorted(expected)!r}]\n")
    after = ex.run(problem(["assert seen() == []", "import os\nassert os.listdir('.') == []"]), probe)
    assert statuses(after) == ["pass", "pass"], after.error_message


# ---- classes the setup defines -------------------------------------------------------------
NODE = "class ListNode:\n    def __init__(self, val, next=None):\n        self.val, self.next = val, next\n"
TO_LIST = ("def to_list(head):\n    out = []\n    while head:\n        out.append(head.val)\n        head = head.next\n"
           "    return out\n")
PUSH = "def push_front(head, val):\n    node = ListNode(val)\n    node.next = head\n    return node\n"
TREE = ("class TreeNode:\n    def __init__(self, val=0, left=None, right=None):\n"
        "        self.val, self.left, self.right = val, left, right\n")
SETUP_CASES = {
    "program_makes_a_node_linked_to_the_tests": (NODE, PUSH + TO_LIST, [
        "assert to_list(push_front(ListNode(2), 1)) == [1, 2]",
        "head = ListNode(5)\nnew = push_front(head, 4)\nassert new.next is head and new.val == 4"]),
    "test_links_the_programs_node": (NODE, "def make(v):\n    return ListNode(v)\n\n" + TO_LIST, [
        "n = make(1)\nn.next = ListNode(2, make(3))\nassert to_list(n) == [1, 2, 3]"]),
    "program_appends_to_the_tests_list": (
        NODE, "def append(head, v):\n    while head.next:\n        head = head.next\n    head.next = ListNode(v)\n"
              "    return head.next\n",
        ["head = ListNode(1)\ntail = append(head, 2)\nassert head.next is tail and tail.val == 2"]),
    "isinstance_in_the_program_and_the_test": (
        NODE, "def kind(x):\n    return 'node' if isinstance(x, ListNode) else 'other'\n\n"
              "def make(v):\n    return ListNode(v)\n",
        ["assert kind(ListNode(1)) == 'node'", "assert kind(3) == 'other'",
         "assert isinstance(make(1), ListNode) and type(make(2)) is ListNode"]),
    "program_deletes_an_attribute": (
        NODE, "def strip(n):\n    del n.tag\n    return n\n",
        ["n = ListNode(1)\nn.tag = 'x'\nassert not hasattr(strip(n), 'tag')"]),
    "setup_method_called_by_the_program": (
        NODE + "    def size(self):\n        return 1 + (self.next.size() if self.next else 0)\n",
        "def both(a, b):\n    a.next = b\n    return a.size()\n",
        ["assert both(ListNode(1), ListNode(2, ListNode(3))) == 3"]),
    "binary_tree_built_by_the_program": (
        TREE, "def insert(root, v):\n    if root is None:\n        return TreeNode(v)\n    if v < root.val:\n"
              "        root.left = insert(root.left, v)\n    else:\n        root.right = insert(root.right, v)\n"
              "    return root\n",
        ["def inorder(t):\n    return inorder(t.left) + [t.val] + inorder(t.right) if t else []\n"
         "root = None\nfor v in [5, 2, 8, 1]:\n    root = insert(root, v)\nassert inorder(root) == [1, 2, 5, 8]"]),
    "wrong_links_still_fail": (NODE, "def push_front(head, val):\n    return ListNode(val)\n\n" + TO_LIST, [
        "assert to_list(push_front(ListNode(2), 1)) == [1, 2]", "assert to_list(push_front(None, 1)) == [1]"]),
    "a_name_the_setup_does_not_bind_is_a_name_error": (NODE, "def make(v):\n    return Missing(v)\n", [
        "make(1)"]),
}


@pytest.mark.parametrize("name", SETUP_CASES)
def test_setup_classes_are_the_programs_names(ex, name):
    setup, code, tests = SETUP_CASES[name]
    ok, seen = agrees_with_python(ex, problem(tests, setup), code)
    assert ok, (name, seen)


def test_the_program_reaches_nothing_else_of_the_setup(ex):
    """Only the setup's classes are the program's: not its functions (HumanEval's ``check``)
    or values, and not what hangs off a class (its ``__init__.__globals__``, its attributes,
    ``__dict__``), so a program cannot fetch the expected value from the setup."""
    setup = NODE + "EXPECTED = 42\n\ndef check(candidate):\n    assert candidate(1) == 42\n"
    routes = [
        "EXPECTED",
        "check(lambda x: x)",
        "ListNode.__init__.__globals__['EXPECTED']",
        "ListNode.__dict__",
        "ListNode(0).__class__.__init__.__globals__['EXPECTED']",
        "ListNode(0).__dict__",
        "ListNode(0).__init__.__globals__['EXPECTED']",
    ]
    for route in routes:
        code = (f"def answer(x):\n    try:\n        return {route}\n    except BaseException as e:\n"
                "        return type(e).__name__\n")
        r = ex.run(problem(["assert answer(1) == 42"], setup), code)
        assert r.status == "fail", (route, r.status, r.error_message)


# ---- hostile: links, FIFOs and directory swaps the program plants ----------------------------
def run_hostile(ex, code, tests):
    r = ex.run(problem(tests), code)
    nothing_left(ex)
    return r


@pytest.mark.parametrize("target", ["/proc/self/mem", "/proc/self/environ", "/proc/self/fd/3",
                                    "/proc/self/maps", "/proc/1/cmdline"])
def test_a_link_never_reaches_the_judges_own_process(ex, target):
    """The judge's view has no ``/proc``: a link to its memory, its socket or its mappings
    names nothing, so a test reading or writing through it errs, and the program never
    receives what the judge would have read."""
    code = f"import os\n\ndef plant():\n    os.symlink({target!r}, 'data')\n\ndef got(x):\n    return x\n"
    r = run_hostile(ex, code, ["plant()\nassert got(open('data', 'rb').read(100)) != b''"])
    assert (r.status, r.error_type) == ("error", "FileNotFoundError"), (target, r.status, r.error_message)
    r = run_hostile(ex, code, ["plant()\nwith open('data', 'wb') as fh:\n    fh.write(b'x' * 64)"])
    assert (r.status, r.error_type) == ("error", "FileNotFoundError"), (target, r.status, r.error_message)
    r = run_hostile(ex, "def f():\n    return 1\n",
                    ["import os\nassert os.listdir('/proc') == [] and not os.path.exists('/proc/self')"])
    assert r.status == "pass", r.error_message


@pytest.mark.parametrize("target", ["/etc/passwd", "/usr/lib/execrl-planted", "/planted", "/dev/shm/../../etc/hosts"])
def test_a_link_writes_nowhere_the_program_could_not(ex, target):
    """A test writing through a link out of the directory writes only where the run could
    write itself (read-only system directories and the private root refuse it)."""
    if ex.isolation["mode"] != "root" and target == "/planted":
        pytest.skip("without a uid switch the run itself may write the private root")
    before = open("/etc/passwd", "rb").read()
    code = f"import os\n\ndef plant():\n    os.symlink({target!r}, 'out.txt')\n"
    r = run_hostile(ex, code, ["plant()\nopen('out.txt', 'w').write('pwned')"])
    assert r.status == "error" and r.error_type in ("PermissionError", "OSError"), (target, r.status, r.error_message)
    assert open("/etc/passwd", "rb").read() == before


def test_a_directory_swapped_for_a_link_leads_nowhere_else(ex):
    """Between the test's ``mkdir`` and its write, the program swaps the directory for a link
    to ``/``, ``/proc/self`` or ``/etc``: the write fails as the run's own would."""
    for target in ("/", "/proc/self", "/etc"):
        code = f"import os\n\ndef swap():\n    os.rmdir('d')\n    os.symlink({target!r}, 'd')\n"
        r = run_hostile(ex, code, ["import os\nos.mkdir('d')\nswap()\nopen('d/mem', 'w').write('x')"])
        assert r.status == "error" and r.error_type in ("PermissionError", "FileNotFoundError", "OSError"), (
            target, r.status, r.error_message)


def test_a_hard_link_shares_only_the_programs_own_file(ex):
    """A hard link the program makes to a file of its own elsewhere: the test's write reaches
    that file, which the program could read anyway, and it is gone for the next program."""
    code = ("import os\n\ndef plant():\n    open('/tmp/keep', 'w').close()\n    os.link('/tmp/keep', 'in.txt')\n\n"
            "def peek():\n    return open('/tmp/keep').read()\n")
    r = run_hostile(ex, code, ["plant()\nopen('in.txt', 'w').write('hi')\nassert peek() == 'hi'"])
    assert r.status == "pass", r.error_message


def test_a_fifo_the_test_opens_times_out_within_the_limits():
    """The test opens a FIFO the program made, which blocks it (plain Python hangs too): the
    sandbox's own wall-clock limit ends the candidate (a timeout, not retried, its worker not
    replaced, as it would be had the executor given up waiting on a stuck worker), and the
    next program is judged by a fresh judge. How soon: ``bench/sandbox_stop_time.py``."""
    limits = ExecutionLimits(timeout_s=1, memory_mb=512, wall_timeout_s=1.5)
    with Executor(workers=1, limits=limits) as ex:
        if not ex.isolation.get("private_root"):
            pytest.skip("no private root")
        for mode in ("w", "r"):
            code = "import os\n\ndef plant():\n    os.mkfifo('pipe')\n"
            r = ex.run(problem([f"plant()\nopen('pipe', {mode!r})", "assert True"]), code)
            assert (r.status, statuses(r)) == ("timeout", ["timeout", "not_run"]), (mode, r.status, r.error_message)
            assert ex.stats()["retries"] == 0 and ex.respawns == 0
            ok = ex.run(problem(["assert f() == 1"]), "def f():\n    return 1\n")
            assert ok.status == "pass"


def test_the_judge_has_no_more_rights_than_the_run(ex):
    """What the judge can write in its view is what the run can write: its directory, the
    scratch mounts; files the tests create there are the run's to change."""
    code = "def change(p):\n    open(p, 'a').write('+')\n    return open(p).read()\n"
    tests = ["open('t.txt', 'w').write('a')\nassert change('t.txt') == 'a+'",
             "import os\nfor d in ('/', '/usr', '/etc', '/dev'):\n    assert not os.access(d, os.W_OK), d"]
    r = ex.run(problem(tests), code)
    assert statuses(r) == ["pass", "pass"], r.error_message
