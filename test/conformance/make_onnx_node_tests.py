"""Writes the ONNX node test cases of the installed onnx package (onnx.backend.test.case.node:
each operator's examples, with outputs from ONNX's reference implementation) as backend-test
case folders: OUT/<case>/model.onnx and test_data_set_<i>/input_<j>.pb, output_<j>.pb, the
layout of Debian's libonnx-testdata that `tcc check` reads. Cases whose inputs or outputs are
not tensors (sequences, optionals, maps) are left out and counted; so is the version of onnx.

    python3 make_onnx_node_tests.py OUT     (the peers venv's interpreter: onnx from PyPI)
"""
import shutil
import sys
import warnings
from pathlib import Path


def main() -> int:
    out = Path(sys.argv[1])
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import onnx.backend.test.case.node as node

    warnings.simplefilter("ignore")
    with np.errstate(all="ignore"):
        cases = node.collect_testcases(None) if node.collect_testcases.__code__.co_argcount else \
            node.collect_testcases()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    written, non_tensor = 0, 0
    for case in cases:
        graph = case.model.graph
        if not all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
            non_tensor += 1
            continue
        d = out / case.name
        d.mkdir()
        (d / "model.onnx").write_bytes(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            s = d / f"test_data_set_{i}"
            s.mkdir()
            for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, value in enumerate(values):
                    proto = value if isinstance(value, onnx.TensorProto) else \
                        numpy_helper.from_array(np.asarray(value), infos[j].name)
                    (s / f"{kind}_{j}.pb").write_bytes(proto.SerializeToString())
        written += 1
    (out / "README").write_text(f"ONNX {onnx.__version__} node test cases: {written} with tensor "
                                f"inputs and outputs written, {non_tensor} others left out\n")
    print(f"onnx {onnx.__version__}: {written} node cases written to {out} ({non_tensor} with "
          "non-tensor inputs or outputs left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
