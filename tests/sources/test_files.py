"""load_paths and find_repo_root: what is read, in which order, and what is not."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from scanner.errors import UsageError
from scanner.inventory import Inventory, ReadError
from scanner.sources import files, rendered
from scanner.sources.files import find_repo_root, load_paths


def manifest(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    return tmp_path


def names(inventory: Inventory) -> list[str]:
    return [obj.name for obj in inventory.objects]


def uris(inventory: Inventory) -> list[str]:
    return [obj.origin.uri for obj in inventory.objects]


# --- find_repo_root ----------------------------------------------------------------


def test_repo_root_is_the_nearest_directory_with_git(repo: Path) -> None:
    nested = repo / "deploy" / "gpu"
    nested.mkdir(parents=True)
    assert find_repo_root(nested) == repo
    assert find_repo_root(write(nested, "a.yaml", "")) == repo


def test_git_file_counts_as_a_repository(tmp_path: Path) -> None:
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: ../main/.git/worktrees/w\n")
    assert find_repo_root(worktree / "k8s") == worktree


def test_without_git_the_working_directory_is_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if any((parent / ".git").exists() for parent in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary directory sits inside a git repository")
    monkeypatch.chdir(tmp_path)
    assert find_repo_root(tmp_path / "x") == Path.cwd()


# --- what is read ------------------------------------------------------------------


def test_directory_walk_reads_manifests_only_in_sorted_order(repo: Path) -> None:
    """Hidden files and directories are read as ``kubectl apply -f DIR -R`` reads them
    (they used to be skipped, so a pull request could hide objects there); ``.git``
    is never entered."""
    write(repo, "k8s/b.yaml", manifest("b"))
    write(repo, "k8s/a.yml", manifest("a"))
    write(
        repo, "k8s/c.json", '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
    )
    write(repo, "k8s/sub/d.yaml", manifest("d"))
    write(repo, "k8s/sub.yaml", manifest("sub"))
    write(repo, "k8s/notes.txt", manifest("txt"))
    write(repo, "k8s/chart.tpl", manifest("tpl"))
    write(repo, "k8s/.hidden.yaml", manifest("hidden-file"))
    write(repo, "k8s/.github/workflow.yaml", manifest("hidden-dir"))
    write(repo, "k8s/.git/objects.yaml", manifest("git"))
    write(repo, "k8s/UPPER.YAML", manifest("upper"))

    inventory = load_paths([str(repo / "k8s")], repo)

    assert uris(inventory) == [
        "k8s/.github/workflow.yaml",
        "k8s/.hidden.yaml",
        "k8s/UPPER.YAML",
        "k8s/a.yml",
        "k8s/b.yaml",
        "k8s/c.json",
        "k8s/sub/d.yaml",
        "k8s/sub.yaml",
    ]
    assert inventory.files == 8
    assert inventory.read_errors == [] and inventory.invalid == []


def test_excluded_files_are_never_read_walked_or_named(repo: Path) -> None:
    config = write(repo, "ci/gate.yaml", manifest("config-in-use"))
    write(repo, "k8s/.poolgate.yaml", manifest("nested-config"))
    write(repo, "k8s/app.yaml", manifest("app"))
    excluded = files.Excluded.of([".poolgate.yaml"], [str(config)])

    walked = load_paths([str(repo)], repo, excluded=excluded)
    named = load_paths(
        [str(config), str(repo / "k8s" / ".poolgate.yaml"), str(repo / "k8s" / "app.yaml")],
        repo,
        excluded=excluded,
    )

    assert names(walked) == names(named) == ["app"]
    assert walked.files == named.files == 1


def test_a_walk_reads_json_only_when_it_holds_an_object(repo: Path) -> None:
    """Other tools' JSON in a repository is no manifest: a tsconfig.json with comments
    was PG001 and a large package-lock.json a read error, so the Action's default scan
    of ``.`` failed ordinary repositories (found in review). A manifest that does not
    name ``"apiVersion"`` in its first 64 KiB is one all the same (issue 21; more in
    test_jsonprobe.py). Named on the command line, a file is read whatever it holds."""
    write(
        repo,
        "k8s/late.json",
        '{"kind": "ConfigMap", "x": "' + "y" * 70_000 + '",'
        ' "apiVersion": "v1", "metadata": {"name": "late"}}',
    )
    write(repo, "web/tsconfig.json", '{\n  // comment\n  "compilerOptions": {},\n}\n')
    write(repo, "web/package-lock.json", '{"name": "web", "packages": {}}' + " " * 2048)
    write(repo, "k8s/list.json", '{"apiVersion": "v1", "kind": "List", "items": []}')
    write(repo, "k8s/broken.json", '{"apiVersion": "v1", "kind": ')

    inventory = load_paths([str(repo)], repo, max_file_size=1024)
    assert inventory.files == 3
    assert [document.origin.uri for document in inventory.invalid] == ["k8s/broken.json"]
    assert [error.uri for error in inventory.read_errors] == ["k8s/late.json"]  # too large
    assert load_paths([str(repo / "k8s")], repo).objects[0].name == "late"
    inventory.read_errors = []
    assert inventory.read_errors == []

    named = load_paths([str(repo / "web" / "tsconfig.json")], repo)
    assert [document.rule_id for document in named.invalid] == ["PG001"]


# --- rendered directories and their marker files -------------------------------------

CHART = "apiVersion: v2\nname: app\nversion: 1.0.0\n"


def test_a_directory_with_a_marker_file_is_a_render_root_and_not_read(repo: Path) -> None:
    write(repo, "charts/app/Chart.yaml", CHART)
    write(repo, "charts/app/templates/x.yaml", "{{ .Values.broken")
    write(repo, "k8s/kustomization.yaml", "resources: [cm.yaml]\n")
    write(repo, "k8s/cm.yaml", manifest("cm"))
    roots: list[Path] = []
    inventory = load_paths([str(repo)], repo, render_roots=roots)
    assert sorted(roots) == [repo / "charts" / "app", repo / "k8s"]
    assert inventory.objects == [] and inventory.read_errors == []


def test_a_marker_that_is_no_regular_file_marks_nothing_and_is_reported(repo: Path) -> None:
    write(repo, "k8s/cm.yaml", manifest("cm"))
    write(repo, "k8s/Chart.yaml/inside.yaml", manifest("inside"))
    write(repo, "k8s/kustomization.yaml", "resources: []\n")  # valid, but beside a broken one
    roots: list[Path] = []
    # Walked twice (named twice over): reported once.
    inventory = load_paths([str(repo), str(repo / "k8s")], repo, render_roots=roots)
    assert roots == []
    assert names(inventory) == ["inside", "cm"]
    assert inventory.read_errors == [
        ReadError(
            "k8s/Chart.yaml",
            "a directory, not a regular file: the directory is scanned as plain manifests, "
            "not rendered as a Helm chart",
        )
    ]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_only_a_regular_file_is_a_marker(repo: Path) -> None:
    """A link is not one, even to a regular file in the repository: what a renderer
    would follow is for it to decide, and a link that leads nowhere renders nothing."""
    write(repo, "source/Chart.yaml", CHART)
    (repo / "linked").mkdir()
    (repo / "linked" / "Chart.yaml").symlink_to(repo / "source" / "Chart.yaml")
    (repo / "dangling").mkdir()
    (repo / "dangling" / "Kustomization").symlink_to(repo / "missing")
    (repo / "directory" / "kustomization.yml").mkdir(parents=True)
    assert rendered.read_markers(repo / "source") == rendered.Markers("helm")
    for directory, marker, what in [
        ("linked", "Chart.yaml", "a symbolic link"),
        ("dangling", "Kustomization", "a symbolic link"),
        ("directory", "kustomization.yml", "a directory"),
    ]:
        markers = rendered.read_markers(repo / directory)
        assert markers.kind is None and rendered.directory_kind(repo / directory) is None
        assert [(path, message.split(":")[0]) for path, message in markers.broken] == [
            (repo / directory / marker, f"{what}, not a regular file")
        ]


def test_a_named_file_renders_the_nearest_root_past_broken_markers(repo: Path) -> None:
    """The pre-commit path routes as a walk would: a directory whose marker is broken is
    read file by file, and the enclosing chart or kustomization above it is rendered."""
    write(repo, "kustomization.yaml", "resources: [k8s/cm.yaml]\n")
    cm = write(repo, "k8s/cm.yaml", manifest("cm"))
    (repo / "k8s" / "Chart.yaml").mkdir()
    enclosing = rendered.find_enclosing(cm, repo)
    assert enclosing.root == repo
    assert [path for path, _ in enclosing.broken] == [repo / "k8s" / "Chart.yaml"]
    assert rendered.enclosing_root(cm, repo) == repo

    (repo / "kustomization.yaml").unlink()
    roots: list[Path] = []
    inventory = load_paths([str(cm)], repo, render_roots=roots)
    assert roots == [] and names(inventory) == ["cm"]
    assert [error.uri for error in inventory.read_errors] == ["k8s/Chart.yaml"]


def test_a_named_file_is_read_whatever_its_extension(repo: Path) -> None:
    path = write(repo, "rendered.txt", manifest("named"))
    inventory = load_paths([str(path)], repo)
    assert names(inventory) == ["named"]
    assert uris(inventory) == ["rendered.txt"]


def test_relative_paths_and_files_outside_the_repository(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "k8s/a.yaml", manifest("inside"))
    outside = write(tmp_path_factory.mktemp("elsewhere"), "b.yaml", manifest("outside"))
    monkeypatch.chdir(repo / "k8s")
    inventory = load_paths(["a.yaml", str(outside)], repo)
    assert uris(inventory) == ["k8s/a.yaml", outside.as_posix()]


def test_stdin(repo: Path) -> None:
    inventory = load_paths(["-"], repo, stdin=io.StringIO(manifest("piped")))
    assert names(inventory) == ["piped"]
    assert uris(inventory) == ["<stdin>"]
    assert inventory.files == 1


def test_a_file_named_twice_is_read_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(repo, "k8s/a.yaml", manifest("a"))
    monkeypatch.chdir(repo)
    inventory = load_paths([str(path), str(repo / "k8s"), "k8s/../k8s/a.yaml"], repo)
    assert names(inventory) == ["a"]


def test_invalid_documents_carry_the_file_uri(repo: Path) -> None:
    write(repo, "k8s/bad.yaml", "apiVersion: v1\nkind: [\n")
    inventory = load_paths([str(repo / "k8s")], repo)
    assert [(i.rule_id, i.origin.uri) for i in inventory.invalid] == [("PG001", "k8s/bad.yaml")]


# --- what fails, and how -----------------------------------------------------------


def test_missing_path_is_a_usage_error_before_anything_is_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    present = write(repo, "a.yaml", manifest("a"))

    def must_not_read(*_args: object) -> str:
        raise AssertionError("read before all paths were checked")

    monkeypatch.setattr(files, "_read", must_not_read)
    with pytest.raises(UsageError) as raised:
        load_paths([str(present), "missing.yaml"], repo)
    assert raised.value.message == "missing.yaml: no such file or directory"
    assert raised.value.hint == "check the path"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_read_error(repo: Path) -> None:
    locked = write(repo, "k8s/locked.yaml", manifest("locked"))
    write(repo, "k8s/open.yaml", manifest("open"))
    locked.chmod(0)
    try:
        inventory = load_paths([str(repo / "k8s")], repo)
    finally:
        locked.chmod(0o644)
    assert inventory.read_errors == [ReadError("k8s/locked.yaml", "permission denied")]
    assert names(inventory) == ["open"]
    assert inventory.files == 2


def test_permission_error_is_a_read_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same path as the test above, for runs as root (containers, CI)."""
    write(repo, "k8s/locked.yaml", manifest("locked"))
    write(repo, "k8s/open.yaml", manifest("open"))
    real_open = open

    def guarded_open(path: object, *args: object, **kwargs: object) -> object:
        if str(path).endswith("locked.yaml"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", guarded_open)
    inventory = load_paths([str(repo / "k8s")], repo)
    assert inventory.read_errors == [ReadError("k8s/locked.yaml", "permission denied")]
    assert names(inventory) == ["open"]


def test_invalid_utf8_is_a_read_error(repo: Path) -> None:
    (repo / "latin1.yaml").write_bytes(b"apiVersion: v1\nkind: ConfigMap # caf\xe9\n")
    inventory = load_paths([str(repo / "latin1.yaml")], repo)
    # The line goes with it, so an annotation or a SARIF region points there (found in
    # review: read errors attached to the whole file).
    assert inventory.read_errors == [
        ReadError("latin1.yaml", "not valid UTF-8 at line 2 (byte offset 36); skipped", 2)
    ]
    assert inventory.objects == [] and inventory.files == 1


def test_invalid_utf8_on_stdin_is_a_read_error(repo: Path) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"kind: caf\xe9\n"), encoding="utf-8")
    inventory = load_paths(["-"], repo, stdin=stdin)
    assert inventory.read_errors == [ReadError("<stdin>", "not valid UTF-8; skipped")]


def test_file_over_the_size_limit_is_skipped(repo: Path) -> None:
    write(repo, "big.yaml", manifest("big") + "#" * 100)
    write(repo, "small.yaml", manifest("small"))
    inventory = load_paths([str(repo)], repo, max_file_size=80)
    assert inventory.read_errors == [ReadError("big.yaml", "file is larger than 80 bytes; skipped")]
    assert names(inventory) == ["small"]


def test_default_size_limit_message() -> None:
    assert files._too_large(files.DEFAULT_MAX_FILE_SIZE) == "file is larger than 10 MiB; skipped"


def test_stdin_over_the_size_limit_is_skipped(repo: Path) -> None:
    inventory = load_paths(["-"], repo, stdin=io.StringIO("x" * 81), max_file_size=80)
    assert [error.message for error in inventory.read_errors] == [
        "file is larger than 80 bytes; skipped"
    ]


# --- symbolic links ----------------------------------------------------------------


def test_symlink_loop_does_not_hang(repo: Path) -> None:
    write(repo, "k8s/a.yaml", manifest("a"))
    (repo / "k8s" / "loop").symlink_to(repo / "k8s", target_is_directory=True)
    (repo / "k8s" / "up").symlink_to(repo, target_is_directory=True)
    (repo / "k8s" / "self.yaml").symlink_to(repo / "k8s" / "self.yaml")

    result: list[Inventory] = []
    worker = threading.Thread(
        target=lambda: result.append(load_paths([str(repo / "k8s")], repo)), daemon=True
    )
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "walk did not finish"
    [inventory] = result
    assert names(inventory) == ["a"]
    assert [error.uri for error in inventory.read_errors] == ["k8s/self.yaml"]


def test_symlinked_file_inside_the_repository_is_read(repo: Path) -> None:
    write(repo, "shared/base.yaml", manifest("shared"))
    (repo / "k8s").mkdir()
    (repo / "k8s" / "base.yaml").symlink_to(repo / "shared" / "base.yaml")
    inventory = load_paths([str(repo / "k8s")], repo)
    assert names(inventory) == ["shared"]
    assert uris(inventory) == ["k8s/base.yaml"]


def test_symlinked_file_outside_the_scanned_tree_is_not_read(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = write(tmp_path_factory.mktemp("home"), "kubeconfig.yaml", manifest("secret"))
    (repo / "k8s").mkdir()
    (repo / "k8s" / "innocent.yaml").symlink_to(secret)
    inventory = load_paths([str(repo / "k8s")], repo)
    assert inventory.objects == []
    assert inventory.read_errors == [
        ReadError(
            "k8s/innocent.yaml", "symbolic link points outside the scanned directory; skipped"
        )
    ]


def test_links_do_not_leave_a_checkout_scanned_from_its_parent(tmp_path: Path) -> None:
    """Found in review: run from a directory that is no repository (a workspace holding
    the checkout in ``src/``), the working directory counted as the repository, so a
    link in the checkout to a file beside it was read. The checkout is the repository."""
    workspace = tmp_path / "workspace"
    (workspace / "src" / ".git").mkdir(parents=True)
    secret = write(workspace, "home/secret.yaml", manifest("secret"))
    write(workspace, "src/k8s/a.yaml", manifest("a"))
    (workspace / "src" / "k8s" / "link.yaml").symlink_to(secret)
    walked = load_paths([str(workspace / "src")], workspace)
    named = load_paths([str(workspace / "src" / "k8s" / "link.yaml")], workspace)
    assert names(walked) == ["a"] and names(named) == []
    assert [error.message for error in walked.read_errors + named.read_errors] == [
        "symbolic link points outside the scanned directory; skipped",
        "symbolic link points outside the repository; skipped",
    ]


def test_a_symlink_to_a_directory_is_not_followed_whatever_its_name(repo: Path) -> None:
    write(repo, "k8s/sub/a.yaml", manifest("a"))
    (repo / "k8s" / "conf.d.yaml").symlink_to(repo / "k8s" / "sub", target_is_directory=True)
    inventory = load_paths([str(repo / "k8s")], repo)
    assert uris(inventory) == ["k8s/sub/a.yaml"]
    assert inventory.read_errors == [] and inventory.files == 1


def test_a_named_symlink_out_of_the_repository_is_not_read(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A pull request may add the link, and the Action scans the files one changes."""
    home = tmp_path_factory.mktemp("home")
    secret = write(home, "kubeconfig.yaml", manifest("secret"))
    write(home, "dir/inner.yaml", manifest("inner"))
    (repo / "k8s").mkdir()
    (repo / "k8s" / "pw.yaml").symlink_to(secret)
    (repo / "k8s" / "elsewhere").symlink_to(home / "dir", target_is_directory=True)
    named = ["k8s/pw.yaml", "k8s/elsewhere", "k8s/elsewhere/inner.yaml"]
    inventory = load_paths([str(repo / name) for name in named], repo)
    assert inventory.objects == []
    message = "symbolic link points outside the repository; skipped"
    assert inventory.read_errors == [ReadError(name, message) for name in named]
    assert inventory.files == 3


def test_named_symlinks_inside_the_repository_are_read(repo: Path) -> None:
    write(repo, "shared/base.yaml", manifest("shared"))
    write(repo, "shared/more/extra.yaml", manifest("extra"))
    (repo / "k8s").mkdir()
    (repo / "k8s" / "base.yaml").symlink_to(repo / "shared" / "base.yaml")
    (repo / "k8s" / "more").symlink_to(repo / "shared" / "more", target_is_directory=True)
    inventory = load_paths([str(repo / "k8s" / "base.yaml"), str(repo / "k8s" / "more")], repo)
    assert uris(inventory) == ["k8s/base.yaml", "k8s/more/extra.yaml"]
    assert inventory.read_errors == []


@pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="needs /dev/fd")
def test_a_named_path_outside_the_repository_is_read_through_links(repo: Path) -> None:
    """The user's own choice: ``poolgate scan <(helm template chart)`` names /dev/fd/63."""
    reading, writing = os.pipe()
    os.write(writing, manifest("rendered").encode())
    os.close(writing)
    try:
        inventory = load_paths([f"/dev/fd/{reading}"], repo)
    finally:
        os.close(reading)
    assert names(inventory) == ["rendered"]
    assert inventory.read_errors == []


def test_invalid_utf8_on_stdin_is_a_read_error_in_the_c_locale(repo: Path) -> None:
    """In the C and POSIX locales Python decodes standard input with surrogateescape,
    so invalid UTF-8 gets through its text layer: the bytes beneath are decoded."""
    data = io.BytesIO(b'a: "\xc3\x28"\n')
    stdin = io.TextIOWrapper(data, encoding="utf-8", errors="surrogateescape")
    inventory = load_paths(["-"], repo, stdin=stdin)
    assert inventory.read_errors == [ReadError("<stdin>", "not valid UTF-8; skipped")]
    assert inventory.invalid == [] and inventory.files == 1


def test_a_file_that_grows_after_stat_is_read_to_its_end_and_limit(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads ask for the size ``fstat`` gave plus one byte, and go on only when that
    byte came: a file still being written (or a filesystem that reports too little)
    is read whole, and still refused past the limit."""
    write(repo, "growing.yaml", manifest("growing"))
    write(repo, "big.yaml", manifest("big") + "#" * 100)
    real = os.fstat

    class Shrunk:
        def __init__(self, result: os.stat_result) -> None:
            self.st_size = min(result.st_size, 10)
            self.st_mode = result.st_mode

    monkeypatch.setattr(files.os, "fstat", lambda descriptor: Shrunk(real(descriptor)))
    inventory = load_paths([str(repo)], repo, max_file_size=80)
    assert names(inventory) == ["growing"]
    assert inventory.read_errors == [ReadError("big.yaml", "file is larger than 80 bytes; skipped")]
