"""Make the packages of ``requirements.txt`` importable before anything needs them.

Stash2Plex.yml starts ``python -S`` (no ``site``: no site-packages, no ``.pth`` files to
run), so a hook, which imports no package, starts as fast as Python can. Tasks, the drainer
and the command line (a hook only when it starts the drainer) call
:func:`ensure_dependencies` first: ``site`` is turned on, ``deps/py<major><minor>`` goes
first on ``sys.path``, packages are found with ``find_spec`` (versions once per interpreter,
remembered in a stamp), and what is missing is installed through PythonDepManager or
``pip install --target`` into a staging folder swapped in on success; else
:class:`DependencyError` gives the command to run (docs/architecture.md, "Dependency bootstrap").
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.errors import DependencyError
from core.platform import HeldLock, shell_command

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec

    from core.log import StashLog

DEPS_DIR = "deps"
REQUIREMENTS_FILE = "requirements.txt"
DEP_MANAGER = "PythonDepManager"
INSTALL_TIMEOUT_S = 900.0
INSTALL_LOCK_PATIENCE_S = 900.0
_LINE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*([^#;]*?)\s*(?:;[^#]*)?(?:#(.*))?$")
# requirements.txt is the one list; an import name that differs from the distribution's is a
# "# import name: x" comment there. Not ``packaging`` for the specifiers: it may itself be
# missing, and ours are plain >=, < and ==.
_IMPORT_NAME = re.compile(r"import name:\s*([A-Za-z_][A-Za-z0-9_]*)")
_CLAUSE = re.compile(r"^(>=|<=|==|!=|>|<)\s*([0-9][0-9A-Za-z.*+-]*)$")


@dataclass(frozen=True)
class Requirement:
    dist: str
    spec: str  # e.g. ">=4.18,<5" ("" for any version)
    module: str


def parse_requirements(text: str) -> list[Requirement]:
    """The requirements of a ``requirements.txt`` (names, specifiers, import names)."""
    found = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith(("#", "-")):
            continue
        match = _LINE.match(raw)
        if match is None:
            raise DependencyError(f"{REQUIREMENTS_FILE}: cannot read the line {raw.strip()!r}")
        dist, spec, comment = match.group(1), match.group(2).replace(" ", ""), match.group(3) or ""
        named = _IMPORT_NAME.search(comment)
        found.append(Requirement(dist, spec, named.group(1) if named else dist.replace("-", "_").lower()))
    return found


def version_tuple(version: str) -> tuple[int, ...]:
    """The numeric release part: ``"2.11.7"`` → ``(2, 11, 7)``; ``"1.0rc1"`` → ``(1, 0)``."""
    release = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in release.group().split(".")) if release else ()


def satisfies(version: str, spec: str) -> bool:
    """Whether ``version`` meets every comma-separated clause of ``spec``."""
    have = version_tuple(version)
    for clause in filter(None, spec.split(",")):
        match = _CLAUSE.match(clause)
        if match is None:
            return True  # a form we do not read (e.g. ~=): let pip's install decide, never block
        op, want = match.group(1), version_tuple(match.group(2).rstrip(".*"))
        width = max(len(have), len(want))
        a, b = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        ok = {">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b, ">": a > b, "<": a < b}[op]
        if not ok:
            return False
    return True


def deps_dir(plugin_dir: Path) -> Path:
    """The plugin-local package folder of this Python (compiled wheels differ by version)."""
    return plugin_dir / DEPS_DIR / f"py{sys.version_info.major}{sys.version_info.minor}"


def install_command(plugin_dir: Path, target: Path | None = None, quiet: bool = False) -> list[str]:
    """``pip install --target`` of the requirements (what we run, and what the error tells users to run)."""
    # --no-compile: pip would byte-compile every module of every package (apprise alone has
    # hundreds); Python compiles what is imported on first use, into the same folder.
    flags = ["--disable-pip-version-check", "--no-input", "--quiet", "--no-compile"] if quiet else []
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        *flags,
        "--target",
        str(target or deps_dir(plugin_dir)),
        "-r",
        str(plugin_dir / REQUIREMENTS_FILE),
    ]


class Bootstrap:
    """One plugin folder's packages: check, then install when needed."""

    def __init__(self, plugin_dir: Path, log: StashLog) -> None:
        self.plugin_dir = plugin_dir
        self.log = log
        self.target = deps_dir(plugin_dir)
        try:
            self.text = (plugin_dir / REQUIREMENTS_FILE).read_text(encoding="utf-8")
        except OSError as exc:
            raise DependencyError(
                f"cannot read {plugin_dir / REQUIREMENTS_FILE} ({exc.strerror or exc}); "
                "reinstall the plugin: the file lists the packages it needs"
            ) from None
        self.requirements = parse_requirements(self.text)
        self.reused = False  # True when another process did the install this one waited for

    # -- checking ---------------------------------------------------------------
    def use_local_folder(self) -> None:
        """Put the plugin-local folder first on ``sys.path`` when it exists."""
        target = str(self.target)
        if os.path.isdir(target) and target not in sys.path:
            sys.path.insert(0, target)
            importlib.invalidate_caches()

    def absent(self) -> list[Requirement]:
        """Requirements that cannot be imported (looked up, not imported)."""
        return [r for r in self.requirements if importlib.util.find_spec(r.module) is None]

    def missing(self) -> list[Requirement]:
        """Requirements not importable, or (checked once per stamp) of the wrong version.
        Each package is looked up once: the stamp is made of the same lookups (interpreter,
        requirements, where each package lives)."""
        specs = [importlib.util.find_spec(r.module) for r in self.requirements]
        absent = [r for r, spec in zip(self.requirements, specs) if spec is None]
        if absent:
            return absent
        stamp_path = self.plugin_dir / DEPS_DIR / "checked.json"
        stamp = json.dumps([sys.executable, sys.version, self.text, [str(spec and spec.origin) for spec in specs]])
        with contextlib.suppress(OSError):
            if stamp_path.read_text(encoding="utf-8") == stamp:
                return []
        wrong = self._wrong_versions()
        if not wrong:
            with contextlib.suppress(OSError):  # a read-only plugin folder: checked again next time
                stamp_path.parent.mkdir(parents=True, exist_ok=True)
                stamp_path.write_text(stamp, encoding="utf-8")
        return wrong

    def _wrong_versions(self) -> list[Requirement]:
        import importlib.metadata as metadata  # only when the stamp is absent

        wrong = []
        for req in self.requirements:
            try:
                version = metadata.version(req.dist)
            except metadata.PackageNotFoundError:
                continue  # importable without metadata (vendored, or a dev checkout): trust it
            if not satisfies(version, req.spec):
                self.log.warning(f"{req.dist} {version} is installed but Stash2Plex needs {req.dist}{req.spec}")
                wrong.append(req)
        return wrong

    # -- installing -----------------------------------------------------------------
    def install(self, missing: list[Requirement]) -> None:
        names = ", ".join(r.dist for r in missing)
        if self._via_dep_manager(missing):
            return
        self.log.info(
            f"installing the Python packages Stash2Plex needs ({names}) into {self.target}; "
            "this happens once and takes a minute"
        )
        failure = self._pip_install()
        self.use_local_folder()
        still = self.absent()
        if failure is None and not still:
            if self.reused:
                self.log.info(f"another Stash2Plex process installed the packages into {self.target}; using them")
            else:
                self.log.info(f"installed the Python packages into {self.target}")
            return
        raise DependencyError(
            self._advice(names, failure or f"{', '.join(r.dist for r in still)} still not importable")
        )

    def _via_dep_manager(self, missing: list[Requirement]) -> bool:
        """Stash's PythonDepManager plugin, when present: it installs into its own cache."""
        if importlib.util.find_spec(DEP_MANAGER) is None:
            return False
        specs = [f"{r.module}:{r.dist}{_dep_manager_spec(r.spec)}" for r in self.requirements]
        self.log.info(f"asking PythonDepManager for {', '.join(r.dist for r in missing)}")
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout is our reply channel
                importlib.import_module(DEP_MANAGER).ensure_import(*specs)
        except Exception as exc:  # a third-party plugin: any failure means "install it ourselves"
            self.log.warning(f"PythonDepManager could not install them ({type(exc).__name__}: {exc}); using pip")
            return False
        importlib.invalidate_caches()
        return not self.absent()

    def _pip_install(self) -> str | None:
        """Install into a staging folder under the install lock, then swap it in. Returns why
        it failed, or None."""
        import shutil

        lock = HeldLock(self.plugin_dir / DEPS_DIR / "install.lock")
        staging = self.target.with_name(f"{self.target.name}.staging-{os.getpid()}")
        try:
            if not lock.acquire(patience=INSTALL_LOCK_PATIENCE_S):
                return "another Stash2Plex process is still installing the packages"
            if self._installed_here():
                self.reused = True  # another process installed them while we waited for the lock
                return None
            shutil.rmtree(staging, ignore_errors=True)
            failure = self._run_pip(staging)
            if failure is None:
                self._swap_in(staging)
            return failure
        except OSError as exc:  # a read-only plugin folder, a full disk
            return f"cannot write {self.plugin_dir / DEPS_DIR} ({exc.strerror or exc})"
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            lock.release()

    def _installed_here(self) -> bool:
        """Every requirement importable from the plugin-local folder itself."""
        if not self.target.is_dir():
            return False
        self.use_local_folder()
        importlib.invalidate_caches()  # the folder may have been swapped in by another process
        return all(self._lives_here(importlib.util.find_spec(r.module)) for r in self.requirements)

    def _lives_here(self, spec: ModuleSpec | None) -> bool:
        """Whether a module spec points into the plugin-local folder. A namespace package
        (stashapi has no __init__.py) has no ``origin``, only ``submodule_search_locations``."""
        if spec is None:
            return False
        places = [spec.origin, *(spec.submodule_search_locations or [])]
        return any(place and str(place).startswith(str(self.target)) for place in places)

    def _run_pip(self, staging: Path) -> str | None:
        import subprocess

        command = install_command(self.plugin_dir, staging, quiet=True)
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                cwd=str(self.plugin_dir),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"pip could not run: {type(exc).__name__}: {exc}"
        if done.returncode == 0:
            return None
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        return f"pip failed (exit {done.returncode}): {' '.join(lines[-3:])[:600] or 'no message'}"

    def _swap_in(self, staging: Path) -> None:
        import shutil

        old = self.target.with_name(f"{self.target.name}.old-{os.getpid()}")
        if self.target.exists():
            os.replace(self.target, old)
        os.replace(staging, self.target)
        shutil.rmtree(old, ignore_errors=True)
        sys.path[:] = [p for p in sys.path if p != str(self.target)]

    def _advice(self, names: str, failure: str) -> str:
        """The error text: what is missing, why installing failed, the exact command to run."""
        command = shell_command(install_command(self.plugin_dir))
        if failure.startswith("cannot write"):
            into_stash = shell_command(
                [sys.executable, "-m", "pip", "install", "-r", str(self.plugin_dir / REQUIREMENTS_FILE)]
            )
            how = f"make that folder writable, or install them into the Python that Stash uses: {into_stash}"
        elif "No module named pip" in failure:
            ensurepip = shell_command([sys.executable, "-m", "ensurepip"])
            how = (
                f"pip is not available for {sys.executable}: install pip for it first (Debian/Ubuntu: "
                f"apt-get install python3-pip; Alpine: apk add py3-pip; or {ensurepip}), then run: {command}"
            )
        else:
            how = f"run this once, with the Python that Stash uses: {command}"
        return (
            f"Stash2Plex needs Python packages that are missing ({names}) and could not install them "
            f"({failure}). To fix it, {how}"
        )


def _dep_manager_spec(spec: str) -> str:
    """PythonDepManager reads one ``==`` or ``>=`` clause: keep that one."""
    for clause in spec.split(","):
        if clause.startswith(("==", ">=")):
            return clause
    return ""


def ensure_dependencies(plugin_dir: Path, log: StashLog) -> bool:
    """Make every package of ``requirements.txt`` importable, or raise DependencyError.
    True when something was missing (and is now installed)."""
    import site

    if sys.flags.no_site and site.ENABLE_USER_SITE is None:  # started with -S, and site.main() has not run yet
        site.main()
    boot = Bootstrap(plugin_dir, log)
    boot.use_local_folder()
    missing = boot.missing()
    if missing:
        boot.install(missing)
    return bool(missing)
