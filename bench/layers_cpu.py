#!/usr/bin/env python3
"""The layers real models use beyond plain GEMMs, tcc against onnxruntime, in one run.

Interpreter: the `python3` on PATH (pip install -r bench/requirements.txt). Each layer is one
ONNX node with constant weights (and a bias), shaped as in a known architecture: transposed
convolutions of upsampling heads (text detection, U-Net, FCN's grouped bilinear upsampling,
a vocoder's 1-D upsampler), dilated (DeepLab's ASPP), 1-D (a Whisper-style audio stem), 3-D
(video), grouped and depthwise convolutions, ResNet-50's strided (downsampling) and 7x7-map
convolutions, max and average pooling, LSTM/GRU layers
(taggers, speech models), and reductions over a dim that is not the innermost (a segmentation
head's softmax and argmax over classes, a channels-first LayerNorm, a max over the batch).
`tcc bench` on the compiled artifact vs `InferenceSession.run` with the same inputs and
threads, alternating rounds; outputs compared. Writes bench/results/<date>-layers-cpu.md and
.json and prints the table. (GEMM-shaped layers: bench/gemm_cpu.py.)

  python3 bench/layers_cpu.py                       # 1 and 2 threads
  python3 bench/layers_cpu.py --threads 1 --iters 20 --only ConvTranspose
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import gemm_cpu  # noqa: E402  (layers_vs_ort, markdown pieces)
import run_cpu  # noqa: E402  (machine info, the tcc driver)

# name, op, input shape, weight shape, attributes
LAYERS = [
    ("text-detection head: ConvTranspose 2x2 s2 64->64 @160x160", "ConvTranspose",
     [1, 64, 160, 160], [64, 64, 2, 2], {"strides": [2, 2]}),
    ("text-detection head: ConvTranspose 2x2 s2 64->1 @320x320", "ConvTranspose",
     [1, 64, 320, 320], [64, 1, 2, 2], {"strides": [2, 2]}),
    ("U-Net up: ConvTranspose 2x2 s2 256->128 @32x32", "ConvTranspose",
     [1, 256, 32, 32], [256, 128, 2, 2], {"strides": [2, 2]}),
    ("decoder: ConvTranspose 4x4 s2 p1 128->64 @40x40", "ConvTranspose",
     [1, 128, 40, 40], [128, 64, 4, 4], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("decoder: ConvTranspose 3x3 s2 p1 op1 64->32 @56x56", "ConvTranspose",
     [1, 64, 56, 56], [64, 32, 3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ("FCN bilinear up: ConvTranspose 4x4 s2 p1 group 21 @64x64", "ConvTranspose",
     [1, 21, 64, 64], [21, 1, 4, 4], {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 21}),
    ("vocoder up: ConvTranspose1d k16 s8 p4 512->256 @64", "ConvTranspose",
     [1, 512, 64], [512, 256, 16], {"strides": [8], "pads": [4, 4]}),
    ("ASPP: Conv 3x3 dilation 6 256->256 @33x33", "Conv",
     [1, 256, 33, 33], [256, 256, 3, 3], {"dilations": [6, 6], "pads": [6, 6, 6, 6]}),
    ("Whisper stem: Conv1d k3 80->384 @3000", "Conv",
     [1, 80, 3000], [384, 80, 3], {"pads": [1, 1]}),
    ("Whisper stem: Conv1d k3 s2 384->384 @3000", "Conv",
     [1, 384, 3000], [384, 384, 3], {"pads": [1, 1], "strides": [2]}),
    ("video: Conv3d 3x3x3 32->32 @8x28x28", "Conv",
     [1, 32, 8, 28, 28], [32, 32, 3, 3, 3], {"pads": [1, 1, 1, 1, 1, 1]}),
    ("ResNeXt: Conv 3x3 group 32 256->256 @28x28", "Conv",
     [1, 256, 28, 28], [256, 8, 3, 3], {"pads": [1, 1, 1, 1], "group": 32}),
    ("ResNet-50 layer2.0: Conv 3x3 s2 p1 128->128 @56x56", "Conv",
     [1, 128, 56, 56], [128, 128, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("ResNet-50 layer4.0: Conv 3x3 s2 p1 512->512 @14x14", "Conv",
     [1, 512, 14, 14], [512, 512, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("ResNet-50 layer2.0 downsample: Conv 1x1 s2 256->512 @56x56", "Conv",
     [1, 256, 56, 56], [512, 256, 1, 1], {"strides": [2, 2]}),
    ("ResNet-50 layer4.0 downsample: Conv 1x1 s2 1024->2048 @14x14", "Conv",
     [1, 1024, 14, 14], [2048, 1024, 1, 1], {"strides": [2, 2]}),
    ("ResNet-50 layer4.1: Conv 1x1 2048->512 @7x7", "Conv",
     [1, 2048, 7, 7], [512, 2048, 1, 1], {}),
    ("MobileNet stem: Conv 3x3 s2 p1 3->32 @224x224", "Conv",
     [1, 3, 224, 224], [32, 3, 3, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("ResNet stem: Conv 7x7 s2 p3 3->64 @224x224", "Conv",
     [1, 3, 224, 224], [64, 3, 7, 7], {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ("MobileNet: depthwise Conv 3x3 32ch @112x112", "Conv",
     [1, 32, 112, 112], [32, 1, 3, 3], {"pads": [1, 1, 1, 1], "group": 32}),
    ("Conformer: depthwise Conv1d k31 256ch @256", "Conv",
     [1, 256, 256], [256, 1, 31], {"pads": [15, 15], "group": 256}),
]

# name, op (LSTM or GRU), sequence length, batch, input size, hidden size, direction
RECURRENT = [
    ("tagger: bidirectional LSTM 128->256, 32 tokens", "LSTM", 32, 1, 128, 256, "bidirectional"),
    ("tagger: bidirectional LSTM 128->256, 200 tokens", "LSTM", 200, 1, 128, 256, "bidirectional"),
    ("speech: LSTM 80->512, 100 frames, batch 4", "LSTM", 100, 4, 80, 512, "forward"),
    ("GRU 256->256, 100 steps", "GRU", 100, 1, 256, 256, "forward"),
]


# name, op (MaxPool or AveragePool), input shape, attributes
POOLS = [
    ("ResNet stem: MaxPool 3x3 s2 p1 64ch @112x112", "MaxPool",
     [1, 64, 112, 112], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("Inception: AveragePool 3x3 s1 p1 192ch @28x28", "AveragePool",
     [1, 192, 28, 28], {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                        "count_include_pad": 0}),
    ("VGG: MaxPool 2x2 s2 128ch @112x112", "MaxPool",
     [1, 128, 112, 112], {"kernel_shape": [2, 2], "strides": [2, 2]}),
]


def _channel_layer_norm(axis: int) -> list:
    """LayerNorm over one dim that is not the innermost, written out as exporters write a
    channels-first LayerNorm2d: mean, centred square, mean, + eps, sqrt, divide."""
    mean = lambda i, o: helper.make_node("ReduceMean", [i], [o], axes=[axis], keepdims=1)
    return [mean("x", "mu"), helper.make_node("Sub", ["x", "mu"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["d2"]), mean("d2", "var"),
            helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
            helper.make_node("Div", ["d", "sd"], ["y"])]


# name, input shape, nodes (input "x", output "y"; constants "eps" = 1e-6 and "axes0" = [0]),
# output type
REDUCTIONS = [
    ("segmentation head: Softmax over 21 classes (axis 1) @256x256", [1, 21, 256, 256],
     [helper.make_node("Softmax", ["x"], ["y"], axis=1)], TensorProto.FLOAT),
    ("segmentation head: ArgMax over 21 classes (axis 1) @256x256", [1, 21, 256, 256],
     [helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)], TensorProto.INT64),
    ("ConvNeXt: LayerNorm over 96 channels (axis 1) @56x56", [1, 96, 56, 56],
     _channel_layer_norm(1), TensorProto.FLOAT),
    ("ReduceMax over the batch (axis 0) of [4096, 512]", [4096, 512],
     [helper.make_node("ReduceMax", ["x"], ["y"], axes=[0], keepdims=0)], TensorProto.FLOAT),
    ("ReduceMax over the frames (axis 1) of [8, 1000, 256]", [8, 1000, 256],
     [helper.make_node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)], TensorProto.FLOAT),
    ("bias gradient: ReduceSum of Relu over the batch (axis 0) of [2048, 1024]", [2048, 1024],
     [helper.make_node("Relu", ["x"], ["r"]),
      helper.make_node("ReduceSum", ["r", "axes0"], ["y"], keepdims=0)], TensorProto.FLOAT),
    ("channels-last global average pool: ReduceMean over 28x28 of [1, 28, 28, 144]", [1, 28, 28, 144],
     [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 2], keepdims=1)], TensorProto.FLOAT),
]


def save_layer(layer, node, inputs, inits, x: np.ndarray, nodes: list | None = None,
               out_type: int = TensorProto.FLOAT) -> None:
    """Writes layer.dir/model.onnx (one node, or `nodes`; output shapes inferred) and its input."""
    nodes = nodes or [node]
    graph = helper.make_graph(nodes, "layer", inputs,
                              [helper.make_tensor_value_info(nodes[-1].output[0], out_type, None)], inits)
    model = shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                                         strict_mode=True)
    layer.y_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    onnx.save(model, layer.onnx_path)
    layer.input = layer.dir / "input_0.pb"
    layer.input.write_bytes(numpy_helper.from_array(x, "x").SerializeToString())


class ConvLayer:
    def __init__(self, root: Path, name: str, op: str, x_shape: list[int], w_shape: list[int], attrs: dict,
                 seed: int):
        self.name, self.op, self.x_shape, self.w_shape, self.attrs = name, op, x_shape, w_shape, attrs
        self.dir = root / f"layer{seed}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(x_shape, dtype=np.float32)
        group = attrs.get("group", 1)
        fan_in = int(np.prod(w_shape[1:])) if op == "Conv" else int(np.prod(w_shape[2:])) * w_shape[0] // group
        w = (rng.standard_normal(w_shape) / math.sqrt(fan_in)).astype(np.float32)
        out_channels = w_shape[0] if op == "Conv" else w_shape[1] * group
        b = rng.standard_normal((out_channels,), dtype=np.float32)
        node = helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)
        save_layer(self, node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")], x)

    def input_paths(self) -> list[Path]:
        return [self.input]

    def fields(self) -> dict:
        return {"op": self.op, "x": self.x_shape, "w": self.w_shape, "y": self.y_shape, "attrs": self.attrs}

    @property
    def gflop(self) -> float:
        """Useful multiply-adds x 2: per output element of a Conv, or per input element of a
        ConvTranspose (each input pixel meets every tap of its group's filters once)."""
        group = self.attrs.get("group", 1)
        taps = int(np.prod(self.w_shape[2:]))
        if self.op == "Conv":
            return 2.0 * int(np.prod(self.y_shape)) * self.w_shape[1] * taps * 1e-9
        return 2.0 * int(np.prod(self.x_shape)) * self.w_shape[1] * taps * 1e-9


class PoolLayer:
    def __init__(self, root: Path, name: str, op: str, x_shape: list[int], attrs: dict, seed: int):
        self.name, self.op, self.x_shape, self.attrs = name, op, x_shape, attrs
        self.dir = root / f"layer{seed}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        x = np.random.default_rng(seed).standard_normal(x_shape, dtype=np.float32)
        node = helper.make_node(op, ["x"], ["y"], **attrs)
        save_layer(self, node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], [], x)

    def input_paths(self) -> list[Path]:
        return [self.input]

    def fields(self) -> dict:
        return {"op": self.op, "x": self.x_shape, "y": self.y_shape, "attrs": self.attrs}

    @property
    def gflop(self) -> float:
        """Not compute-bound: reported as 0 (the table's GFLOP/s is then empty)."""
        return 0.0


class ReduceLayer:
    def __init__(self, root: Path, name: str, x_shape: list[int], nodes: list, out_type: int, seed: int):
        self.name, self.x_shape = name, x_shape
        self.op = "+".join(dict.fromkeys(n.op_type for n in nodes))
        self.dir = root / f"layer{seed}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        x = np.random.default_rng(seed).standard_normal(x_shape, dtype=np.float32)
        consts = [numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
                  numpy_helper.from_array(np.array([0], np.int64), "axes0")]
        used = [c for c in consts if any(c.name in n.input for n in nodes)]
        save_layer(self, None, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], used, x,
                   nodes, out_type)

    def input_paths(self) -> list[Path]:
        return [self.input]

    def fields(self) -> dict:
        return {"op": self.op, "x": self.x_shape, "y": self.y_shape}

    @property
    def gflop(self) -> float:
        """Not compute-bound: reported as 0 (the table's GFLOP/s is then empty)."""
        return 0.0


class RecurrentLayer:
    def __init__(self, root: Path, name: str, op: str, steps: int, batch: int, inputs: int, hidden: int,
                 direction: str, seed: int):
        self.name, self.op, self.steps, self.batch, self.inputs, self.hidden = name, op, steps, batch, inputs, hidden
        self.direction = direction
        self.dirs = 2 if direction == "bidirectional" else 1
        self.gates = 4 if op == "LSTM" else 3
        self.dir = root / f"layer{seed}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.onnx_path = self.dir / "model.onnx"
        rng = np.random.default_rng(seed)
        g, d = self.gates * hidden, self.dirs
        scale = 1 / math.sqrt(hidden)
        w = (rng.uniform(-scale, scale, (d, g, inputs))).astype(np.float32)
        r = (rng.uniform(-scale, scale, (d, g, hidden))).astype(np.float32)
        b = (rng.uniform(-scale, scale, (d, 2 * g))).astype(np.float32)
        x = rng.standard_normal((steps, batch, inputs), dtype=np.float32)
        node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=hidden, direction=direction)
        save_layer(self, node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                   [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
                    numpy_helper.from_array(b, "B")], x)

    def input_paths(self) -> list[Path]:
        return [self.input]

    def fields(self) -> dict:
        return {"op": self.op, "steps": self.steps, "batch": self.batch, "input_size": self.inputs,
                "hidden": self.hidden, "direction": self.direction}

    @property
    def gflop(self) -> float:
        """The input and recurrent products (2 flops per multiply-add); gates' pointwise work not counted."""
        return 2.0 * self.dirs * self.steps * self.batch * self.gates * self.hidden * (self.inputs + self.hidden) * 1e-9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--iters", type=int, default=30, help="timed runs per round (default 30)")
    ap.add_argument("--only", default="", help="only layers whose name contains this text")
    ap.add_argument("--tcc", default=str(run_cpu.ROOT / "build" / "bin" / "tcc"))
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    ap.add_argument("--keep", metavar="DIR", help="write the layer models (layer<i>/model.onnx, input_0.pb) "
                    "here and keep them, e.g. for tcc profile")
    args = ap.parse_args()

    info = run_cpu.machine_info()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tcc-layers-bench-") as tmp:
        work = Path(tmp)
        models = Path(args.keep) if args.keep else work / "models"
        layers = [ConvLayer(models, *spec, seed=i) for i, spec in enumerate(LAYERS) if args.only in spec[0]]
        layers += [PoolLayer(models, *spec, seed=50 + i) for i, spec in enumerate(POOLS)
                   if args.only in spec[0]]
        layers += [RecurrentLayer(models, *spec, seed=100 + i)
                   for i, spec in enumerate(RECURRENT) if args.only in spec[0]]
        layers += [ReduceLayer(models, *spec, seed=150 + i)
                   for i, spec in enumerate(REDUCTIONS) if args.only in spec[0]]
        tcc = run_cpu.Tcc(args.tcc, 600, work / "tcc")
        for t in args.threads:
            rows += gemm_cpu.layers_vs_ort(layers, tcc, t, args.iters)
    lines = gemm_cpu.machine_lines("Convolution and recurrent layers: tcc vs onnxruntime (CPU)", info)
    lines += gemm_cpu.layers_markdown(rows, "One ONNX Conv, ConvTranspose, pooling, LSTM or GRU node with constant weights "
                                      "and bias (or a reduction's few nodes), `tcc bench` on the compiled artifact vs `InferenceSession.run`, "
                                      "same input and threads, median of 3 alternating rounds. GFLOP/s count "
                                      "useful multiply-adds only (not the zeros of a dilated input, not the "
                                      "gates' pointwise work).")
    gemm_cpu.write_results(args.out_dir, "layers-cpu", {"machine": info, "layers": rows}, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
