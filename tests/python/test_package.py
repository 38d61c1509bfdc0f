# SPDX-License-Identifier: BSD-3-Clause
"""The distribution CMake lays out in <build>/python (python/package): installed offline by
Debian's pip into a fresh environment, it brings ex2d (with its compiled module), ex2d_desi and
ex2d_qa with their templates and the ex2d-qa command, declares its dependencies, and is refused,
naming a dependency, where one is missing."""

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

BUILT = os.environ["EX2D_PYTHON_BUILD_DIR"]
PACKAGES = ("ex2d", "ex2d_desi", "ex2d_qa")


def tools_missing():
    return any(importlib.util.find_spec(name) is None for name in ("pip", "setuptools", "venv"))


pytestmark = pytest.mark.skipif(
    tools_missing(), reason="this Python lacks pip, setuptools or venv "
                            "(Debian python3-pip, python3-setuptools, python3-venv)")


def environment(folder, system_site):
    """A virtual environment of this Python, with or without its installed packages."""
    options = ["--system-site-packages"] if system_site else []
    subprocess.run([sys.executable, "-m", "venv", *options, str(folder)], check=True)
    return os.path.join(folder, "bin", "python")


def source_copy(tmp_path):
    """The built distribution copied, as pip and setuptools write into the folder they build."""
    source = tmp_path / "source"
    for name in PACKAGES:
        shutil.copytree(os.path.join(BUILT, name), source / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(os.path.join(BUILT, name), source / name)
    return source


def pip_install(python, source):
    return subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                           str(source)], capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("package")
    python = environment(tmp_path / "venv", system_site=True)
    done = pip_install(python, source_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    return python, tmp_path


def probe(python, code, cwd):
    """Runs ``code`` in the environment, from ``cwd``, with no PYTHONPATH (the build folder's
    copies must not be what is imported)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=cwd,
                          env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_the_three_packages_import_from_the_environment(installed):
    python, tmp_path = installed
    site = probe(python, "import sysconfig; print(sysconfig.get_paths()['platlib'])", tmp_path)
    for name in PACKAGES:
        where = probe(python, f"import {name}; print({name}.__file__)", tmp_path)
        assert where == os.path.join(site, name, "__init__.py")
    module = probe(python, "import ex2d._ex2d as m; print(m.__file__)", tmp_path)
    assert module.startswith(os.path.join(site, "ex2d", "_ex2d"))
    assert module.endswith(sysconfig.get_config_var("EXT_SUFFIX"))


def test_the_module_extracts_after_installing(installed):
    python, tmp_path = installed
    version = probe(python, "import ex2d, importlib.metadata as m; "
                            "print(ex2d.__version__, m.version('ex2d'))", tmp_path)
    first, second = version.split()
    assert first == second
    code = """
import ex2d
ex2d.run(["make-psf", "--camera", "r0", "-o", "psf.fits"])
ex2d.run(["simulate", "-p", "psf.fits", "-o", "preproc.fits", "--truth", "truth.fits",
          "-s", "0", "-n", "5", "-w", "6000.0,6040.0,0.8"])
pre = ex2d.read_preproc("preproc.fits")
result = ex2d.extract(pre.image, pre.ivar, pre.mask, ex2d.read_psf("psf.fits"),
                      wavelength=(6000.0, 6040.0, 0.8), nspec=5, bundlesize=5, nsubbundles=1, threads=1)
print(result.flux.shape, result.npatch_failed)
"""
    assert probe(python, code, tmp_path) == "(5, 51) 0"


def test_dependencies_are_declared(installed):
    python, tmp_path = installed
    requires = probe(python, "import importlib.metadata as m; print(sorted(m.requires('ex2d')))",
                     tmp_path)
    assert requires == "['astropy', 'jinja2', 'matplotlib', 'numpy']"
    tag = probe(python, "import importlib.metadata as m; "
                        "print(m.distribution('ex2d').read_text('WHEEL'))", tmp_path)
    cpython = "cp%d%d" % sys.version_info[:2]
    assert f"Tag: {cpython}-{cpython}-" in tag, tag
    assert "Root-Is-Purelib: false" in tag


def test_the_qa_report_has_its_templates_and_command(installed):
    python, tmp_path = installed
    names = probe(python, "import jinja2, ex2d_qa.page as p; "
                          "print(sorted(jinja2.Environment(loader=jinja2.PackageLoader("
                          "'ex2d_qa', 'templates')).list_templates()))", tmp_path)
    assert names == "['cells.html.j2', 'exposure.html.j2', 'page.css', 'page.html.j2']"
    command = os.path.join(os.path.dirname(python), "ex2d-qa")
    done = subprocess.run([command, "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_a_missing_dependency_is_refused_by_name(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                            "--no-build-isolation", "-w", str(wheels), str(source_copy(tmp_path))],
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("ex2d-*.whl")
    python = environment(tmp_path / "bare", system_site=False)
    done = subprocess.run([python, "-m", "pip", "install", "--no-index", str(wheel)],
                          capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "No matching distribution found for" in done.stderr, done.stderr
    missing = done.stderr.split("No matching distribution found for", 1)[1].split()[0]
    assert missing in ("numpy", "astropy", "matplotlib", "jinja2")
    site = subprocess.run([python, "-c", "import ex2d"], capture_output=True, check=False)
    assert site.returncode != 0
