"""Builds the Python package with the project's CMake and packages what it assembles in
<build>/python/nanovllm (the extension module, the Python layer, the presets' tokenizer).

The CMake build directory is $NANOVLLM_BUILD_DIR, default build/ (the README's build, reused:
only the extension module is built on top of it). A new one is configured with
$NANOVLLM_CMAKE_ARGS (e.g. "-DNANOVLLM_CUDA=OFF")."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.abspath(os.environ.get("NANOVLLM_BUILD_DIR") or os.path.join(ROOT, "build"))
os.makedirs(BUILD_DIR, exist_ok=True)


def version():
    text = open(os.path.join(ROOT, "src/nanovllm/utils/version.h")).read()
    return re.search(r'kVersion = "([^"]+)"', text).group(1)


class CMakeBuildPy(build_py):
    def run(self):
        package = os.path.join(BUILD_DIR, "python", "nanovllm")
        configure = ["cmake", "-S", ROOT, "-B", BUILD_DIR, "-DNANOVLLM_PYTHON=ON"]
        if not os.path.exists(os.path.join(BUILD_DIR, "CMakeCache.txt")):
            configure += [f"-DPython_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"]
            configure += ["-G", "Ninja"] if shutil.which("ninja") else []
            configure += shlex.split(os.environ.get("NANOVLLM_CMAKE_ARGS", ""))
            subprocess.check_call(configure)
        elif not os.path.isdir(package):  # configured without the Python package: add it
            subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", BUILD_DIR, "--target", "nanovllm_python_package",
                               "-j", str(os.cpu_count() or 1)])
        module = "_core" + sysconfig.get_config_var("EXT_SUFFIX")
        if not os.path.exists(os.path.join(package, module)):
            sys.exit(f"error: {BUILD_DIR} builds the extension for another Python than {sys.executable} "
                     f"(no {module}): set NANOVLLM_BUILD_DIR to a new directory")
        dst = os.path.join(self.build_lib, "nanovllm")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(package, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):  # a platform wheel: the package holds a compiled module
        return True


setup(
    version=version(),
    packages=["nanovllm"],
    package_dir={"nanovllm": "python/nanovllm"},
    cmdclass={"build_py": CMakeBuildPy},
    distclass=BinaryDistribution,
    # setuptools' own files go into the CMake build directory, not the checkout.
    options={"build": {"build_base": os.path.join(BUILD_DIR, "setuptools")}, "egg_info": {"egg_base": BUILD_DIR}},
    zip_safe=False,
)
