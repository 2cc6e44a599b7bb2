# lit configuration for tcc: .mlir tests run through tcc-opt, .test files drive the tcc CLI.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "tcc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tcc_obj_root, "test", "lit")
config.substitutions.append(("%testdata", config.onnx_testdata_dir))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", "/usr/bin/python3"))
# `%tcc-python`: Debian's interpreter with the Python package from the source tree on this
# build's libraries (python/tcc/_capi.py reads TCC_LIBRARY_DIR), without installing it.
config.substitutions.append(
    ("%tcc-python", "env PYTHONPATH=%s TCC_LIBRARY_DIR=%s /usr/bin/python3" % (
        os.path.join(config.tcc_src_root, "python"), os.path.join(config.tcc_obj_root, "lib"))))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.tcc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["tcc-opt", "tcc"], [config.tcc_tools_dir])

# `REQUIRES: nvrtc`: this tcc compiles for CUDA (built with the CUDA toolkit's NVRTC); tests of
# the build without it say `UNSUPPORTED: nvrtc`.
if config.have_nvrtc:
    config.available_features.add("nvrtc")

# `REQUIRES: onnxruntime`, `%peers-python`: the comparison tests' interpreter
# (scripts/setup.sh's peers venv, CMake's TCC_PEERS_PYTHON) can import onnxruntime.
import subprocess
config.substitutions.append(("%peers-python", config.peers_python))
if os.path.exists(config.peers_python) and subprocess.run(
        [config.peers_python, "-c", "import onnxruntime"], capture_output=True).returncode == 0:
    config.available_features.add("onnxruntime")
# `REQUIRES: onnx-latest`: it has onnx >= 1.23, whose node test cases
# (test/conformance/make_onnx_node_tests.py) include float8 and 4-/2-bit integer data.
if os.path.exists(config.peers_python) and subprocess.run(
        [config.peers_python, "-c", "import onnx, sys; "
         "sys.exit(tuple(map(int, onnx.__version__.split('.')[:2])) < (1, 23))"],
        capture_output=True).returncode == 0:
    config.available_features.add("onnx-latest")

# `REQUIRES: fakecuda`, `%fakecuda CMD`: CMD runs CUDA artifacts on the fake CUDA driver and the
# fake cuBLASLt (test/runtime/fakecuda; GEMMs computed on the host from the runtime's
# descriptors), where the build made them.
fake_cuda_dir = os.path.join(config.tcc_obj_root, "test", "runtime", "fakecuda")
fake_cuda = [os.path.join(fake_cuda_dir, "libtcc-fakecuda.so"),
             os.path.join(fake_cuda_dir, "libtcc-fakecublaslt.so")]
if all(os.path.exists(f) for f in fake_cuda):
    config.available_features.add("fakecuda")
    config.substitutions.append(
        ("%fakecuda", "env TCC_CUDA_DRIVER=%s TCC_CUBLASLT_LIBRARY=%s" % tuple(fake_cuda)))
