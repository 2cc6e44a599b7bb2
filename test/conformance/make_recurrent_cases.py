#!/usr/bin/env python3
"""RNN, GRU and LSTM nodes in every direction, with onnxruntime's outputs as the reference.

The ONNX backend tests have forward-only recurrences; this writes the cases they lack, in the
backend-test layout (DIR/<case>/model.onnx, test_data_set_0/{input,output}_<i>.pb) for `tcc
check`: bidirectional and reverse directions, sequence_lens shorter than the sequence,
initial_h/initial_c, peepholes, layout 1, clip, GRU's linear_before_reset, different
activations per direction, sequences short enough to be unrolled and long enough to run in a
loop (64 steps is the importer's limit), all three outputs. Fresh random inputs and weights
(never zeros), seeded.

  make_recurrent_cases.py DIR [--seed N]

Needs numpy, onnx and onnxruntime: scripts/setup.sh's peers venv.
"""
import argparse
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}

# name, op, direction, T, B, I, H, options
CASES = [
    ("lstm_bidirectional", "LSTM", "bidirectional", 7, 2, 5, 6, {}),
    ("lstm_bidirectional_long", "LSTM", "bidirectional", 70, 2, 4, 5, {}),
    ("lstm_bidirectional_seq_lens", "LSTM", "bidirectional", 9, 3, 4, 5,
     {"lens": [9, 4, 1], "initial": True}),
    ("lstm_bidirectional_long_seq_lens", "LSTM", "bidirectional", 67, 3, 3, 4,
     {"lens": [67, 30, 2], "initial": True}),
    ("lstm_bidirectional_peepholes_layout1", "LSTM", "bidirectional", 6, 2, 3, 4,
     {"peepholes": True, "layout": 1, "initial": True}),
    ("lstm_bidirectional_per_direction_activations", "LSTM", "bidirectional", 5, 2, 3, 4,
     {"activations": ["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Tanh", "Relu"]}),
    ("lstm_bidirectional_clip_no_bias", "LSTM", "bidirectional", 8, 1, 4, 3,
     {"clip": 0.7, "no_bias": True}),
    ("lstm_reverse_long", "LSTM", "reverse", 66, 2, 3, 4, {"lens": [66, 20]}),
    ("gru_bidirectional", "GRU", "bidirectional", 6, 2, 4, 5, {"initial": True}),
    ("gru_bidirectional_linear_before_reset_long", "GRU", "bidirectional", 68, 2, 3, 4,
     {"linear_before_reset": 1, "lens": [68, 33]}),
    ("gru_reverse_seq_lens", "GRU", "reverse", 7, 3, 3, 4, {"lens": [7, 2, 5]}),
    ("rnn_bidirectional_layout1", "RNN", "bidirectional", 6, 3, 4, 5,
     {"layout": 1, "initial": True, "lens": [6, 3, 4]}),
    ("rnn_bidirectional_long", "RNN", "bidirectional", 65, 1, 3, 4, {}),
]


def make_case(out_dir, name, op, direction, T, B, I, H, opts, rng):
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    layout = opts.get("layout", 0)
    scale = np.float32(1.0 / np.sqrt(H))

    def rand(*shape, lo=-1.0, hi=1.0):
        a = rng.uniform(lo, hi, size=shape).astype(np.float32)
        a[np.abs(a) < 0.02] = 0.3
        return a

    inputs, feeds, inits = [], {}, []

    def feed(nm, array):
        inputs.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT if array.dtype == np.float32
                                                    else TensorProto.INT32, array.shape))
        feeds[nm] = array
        return nm

    def init(nm, array):
        inits.append(numpy_helper.from_array(array, nm))
        return nm

    x = feed("X", rand(B, T, I) if layout else rand(T, B, I))
    w = init("W", rand(D, G * H, I) * scale)
    r = init("R", rand(D, G * H, H) * scale)
    node_inputs = [x, w, r]
    node_inputs.append("" if opts.get("no_bias") else init("B", rand(D, 2 * G * H) * np.float32(0.5)))
    node_inputs.append(feed("sequence_lens", np.array(opts["lens"], np.int32)) if "lens" in opts else "")
    state_shape = (B, D, H) if layout else (D, B, H)
    node_inputs.append(feed("initial_h", rand(*state_shape)) if opts.get("initial") else "")
    if op == "LSTM":
        node_inputs.append(feed("initial_c", rand(*state_shape)) if opts.get("initial") else "")
        node_inputs.append(init("P", rand(D, 3 * H) * np.float32(0.5)) if opts.get("peepholes") else "")
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": H, "direction": direction}
    if layout:
        attrs["layout"] = 1
    for key in ("clip", "linear_before_reset"):
        if key in opts:
            attrs[key] = opts[key]
    if "activations" in opts:
        attrs["activations"] = opts["activations"]
        alphas = [0.2 if a == "HardSigmoid" else 1.0 for a in opts["activations"]
                  if a in ("HardSigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "Elu")]
        if alphas:
            attrs["activation_alpha"] = alphas
    node = helper.make_node(op, node_inputs, outputs, **attrs)
    graph = helper.make_graph([node], name, inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    reference, reference_feeds = model, feeds
    if layout:  # onnxruntime runs layout 0 only: the same node on transposed inputs
        reference = onnx.ModelProto()
        reference.CopyFrom(model)
        ref_node = reference.graph.node[0]
        del ref_node.attribute[[a.name for a in ref_node.attribute].index("layout")]
        reference_feeds = {k: (v.transpose(1, 0, 2) if k in ("X", "initial_h", "initial_c") else v)
                           for k, v in feeds.items()}
        for vi in reference.graph.input:
            if vi.name in ("X", "initial_h", "initial_c"):
                dims = vi.type.tensor_type.shape.dim
                dims[0].dim_value, dims[1].dim_value = dims[1].dim_value, dims[0].dim_value
        del reference.graph.value_info[:]
        for o in reference.graph.output:
            o.type.tensor_type.ClearField("shape")
    results = ort.InferenceSession(reference.SerializeToString(), so,
                                   providers=["CPUExecutionProvider"]).run(outputs, reference_feeds)
    if layout:  # Y [T, D, B, H] -> [B, T, D, H]; Y_h, Y_c [D, B, H] -> [B, D, H]
        results = [r.transpose(2, 0, 1, 3) if r.ndim == 4 else r.transpose(1, 0, 2) for r in results]
    case = os.path.join(out_dir, "test_" + name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for i, vi in enumerate(inputs):
        tensor = numpy_helper.from_array(feeds[vi.name], vi.name)
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(tensor.SerializeToString())
    for i, (o, value) in enumerate(zip(outputs, results)):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(value, o).SerializeToString())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    for case in CASES:
        make_case(args.out_dir, *case, rng)
    with open(os.path.join(args.out_dir, "README"), "w") as f:
        f.write(f"onnxruntime {ort.__version__} seed {args.seed}: {len(CASES)} recurrent cases "
                "(test/conformance/make_recurrent_cases.py)\n")
    print(f"wrote {len(CASES)} recurrent cases to {args.out_dir}")


if __name__ == "__main__":
    main()
