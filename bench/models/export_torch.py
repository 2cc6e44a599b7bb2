#!/usr/bin/env python3
"""Real architectures from PyPI torchvision / timm / transformers, random weights, exported to ONNX.

Interpreter: .venv-peers/bin/python (torch, torchvision, timm, transformers, onnx, onnxruntime;
scripts/setup.sh makes it). Each model is built with a fixed seed and random weights (no download),
put in eval mode and exported with `torch.onnx.export` (opset 17, the TorchScript exporter that
most deployments still use) into bench/models/generated/<name>/ in the layout make_models.py
writes: model.onnx, test_data_set_0/input_<i>.pb (fresh random inputs, fixed seed) and, with
--with-outputs, onnxruntime's outputs (no graph optimizations). FLOPs (multiply-add = 2) come from
torch's FlopCounterMode (GEMMs, convolutions, attention); the LSTM's are counted by hand. The list
goes to generated/torch_models.json, which make_models.all_models() reads, so run_cpu.py and
torch_compile_cpu.py bench these models by name.

  .venv-peers/bin/python bench/models/export_torch.py [--with-outputs] [NAME ...]
  .venv-peers/bin/python bench/models/export_torch.py --list
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_models  # noqa: E402  (save_tensor, the generated folder, flops.json)

OPSET = 17


def _resnet(arch):
    def build():
        import torchvision
        return getattr(torchvision.models, arch)(weights=None), [("input", (1, 3, 224, 224), "image")]
    return build


def _torchvision(arch, size=224):
    def build():
        import torchvision
        return getattr(torchvision.models, arch)(weights=None), [("input", (1, 3, size, size), "image")]
    return build


def _deeplab():
    import torch
    import torchvision
    m = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                      aux_loss=False)

    class OutOnly(torch.nn.Module):  # the dict output becomes one tensor
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)["out"]
    return OutOnly(m), [("input", (1, 3, 256, 256), "image")]


def _centernet():
    """CenterNet with a ResNet-18 trunk: three 4x4 stride-2 transposed convolutions upsample the
    stride-32 features to stride 4, then heat-map, size and offset heads (Zhou et al. 2019, the
    DCN-free variant)."""
    import torch
    import torchvision
    nn = torch.nn

    class CenterNet(nn.Module):
        def __init__(self, classes=80):
            super().__init__()
            r = torchvision.models.resnet18(weights=None)
            self.trunk = nn.Sequential(r.conv1, r.bn1, r.relu, r.maxpool, r.layer1, r.layer2, r.layer3, r.layer4)
            layers, c = [], 512
            for out in (256, 128, 64):
                layers += [nn.Conv2d(c, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
                           nn.ConvTranspose2d(out, out, 4, stride=2, padding=1, bias=False), nn.BatchNorm2d(out),
                           nn.ReLU(inplace=True)]
                c = out
            self.up = nn.Sequential(*layers)

            def head(n):
                return nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(64, n, 1))
            self.heat, self.size, self.offset = head(classes), head(2), head(2)

        def forward(self, x):
            f = self.up(self.trunk(x))
            return torch.sigmoid(self.heat(f)), self.size(f), self.offset(f)
    return CenterNet(), [("input", (1, 3, 384, 384), "image")]


def _vit():
    import timm
    return timm.create_model("vit_small_patch16_224", pretrained=False), [("input", (1, 3, 224, 224), "image")]


def _bert():
    import transformers
    cfg = transformers.BertConfig()  # bert-base: 12 layers, d 768, 12 heads
    return transformers.BertModel(cfg, add_pooling_layer=True), [
        ("input_ids", (1, 128), ("tokens", cfg.vocab_size)), ("attention_mask", (1, 128), "mask")]


def _gpt2():
    import transformers
    cfg = transformers.GPT2Config(use_cache=False)  # gpt2 small: 12 layers, d 768, 12 heads
    return transformers.GPT2LMHeadModel(cfg), [("input_ids", (1, 128), ("tokens", cfg.vocab_size))]


def _whisper_encoder():
    import transformers
    cfg = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                                     decoder_layers=4, decoder_attention_heads=6, encoder_ffn_dim=1536,
                                     decoder_ffn_dim=1536)  # whisper-tiny's encoder
    return transformers.WhisperModel(cfg).get_encoder(), [("input_features", (1, 80, 3000), "audio")]


LSTM_DIMS = dict(vocab=10000, embed=128, hidden=256, layers=2, tags=20, seq=128)


def _lstm():
    """A bidirectional two-layer LSTM tagger (embedding, LSTM, per-token linear)."""
    import torch
    nn = torch.nn
    d = LSTM_DIMS

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(d["vocab"], d["embed"])
            self.lstm = nn.LSTM(d["embed"], d["hidden"], d["layers"], batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * d["hidden"], d["tags"])

        def forward(self, ids):
            return self.out(self.lstm(self.embed(ids))[0])
    return Tagger(), [("input_ids", (1, d["seq"]), ("tokens", d["vocab"]))]


def _lstm_flops() -> int:
    d = LSTM_DIMS
    total, width = 0, d["embed"]
    for _ in range(d["layers"]):
        total += 2 * 2 * d["seq"] * 4 * d["hidden"] * (width + d["hidden"])  # 2 directions, 4 gates
        width = 2 * d["hidden"]
    return total + 2 * d["seq"] * 2 * d["hidden"] * d["tags"]


# name -> (builder, what it is and where it comes from)
MODELS = {
    "tv_resnet18": (_resnet("resnet18"), "torchvision resnet18, 1x3x224x224"),
    "tv_resnet50": (_resnet("resnet50"), "torchvision resnet50, 1x3x224x224"),
    "tv_mobilenet_v3": (_torchvision("mobilenet_v3_large"),
                        "torchvision mobilenet_v3_large (hard-swish, squeeze-excitation), 1x3x224x224"),
    "tv_efficientnet_b0": (_torchvision("efficientnet_b0"),
                           "torchvision efficientnet_b0 (SiLU, squeeze-excitation, 5x5 depthwise), 1x3x224x224"),
    "tv_deeplabv3": (_deeplab, "torchvision deeplabv3_mobilenet_v3_large segmentation (dilated depthwise, ASPP, "
                     "bilinear upsampling to the input size), 1x3x256x256"),
    "centernet_r18": (_centernet, "CenterNet detector on a torchvision resnet18 trunk: three ConvTranspose2d "
                      "4x4/2 upsampling stages, heat-map/size/offset heads, 1x3x384x384"),
    "timm_vit_s16": (_vit, "timm vit_small_patch16_224 (d 384, 12 layers, 6 heads), 1x3x224x224"),
    "hf_bert_base": (_bert, "transformers BertModel, bert-base config (12 layers, d 768), 1x128 tokens with a "
                     "padding mask (96 real)"),
    "hf_gpt2": (_gpt2, "transformers GPT2LMHeadModel, gpt2-small config (12 layers, d 768, 50257-word head), "
                "1x128 tokens, causal"),
    "hf_whisper_enc": (_whisper_encoder, "transformers WhisperEncoder, whisper-tiny config (4 layers, d 384), "
                       "1x80x3000 log-mel frames (two Conv1d, 1500 positions)"),
    "lstm_tagger": (_lstm, "bidirectional 2-layer LSTM tagger (embed 128, hidden 256, 20 tags), 1x128 tokens"),
}


def make_inputs(specs, seed: int):
    import numpy as np
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, shape, kind in specs:
        if kind in ("image", "audio"):
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
        elif kind == "mask":
            m = np.ones(shape, np.int64)
            m[..., shape[-1] * 3 // 4:] = 0  # the last quarter is padding
            feeds[name] = m
        else:
            feeds[name] = rng.integers(0, kind[1], size=shape, dtype=np.int64)
    return feeds


def build_module(name: str):
    """The eval-mode module with its seeded random weights, and its example inputs (numpy)."""
    import torch
    torch.manual_seed(sorted(MODELS).index(name) + 100)
    module, specs = MODELS[name][0]()
    module.eval()
    return module, make_inputs(specs, seed=sorted(MODELS).index(name) + 200)


def count_flops(name, module, args) -> int:
    if name == "lstm_tagger":
        return _lstm_flops()
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        module(*args)
    return int(fc.get_total_flops())


def export(name: str, with_outputs: bool, out_dir: Path) -> dict:
    import numpy as np
    import onnx
    import torch
    module, feeds = build_module(name)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    mdir = out_dir / name
    ds = mdir / "test_data_set_0"
    ds.mkdir(parents=True, exist_ok=True)
    for old in ds.glob("*.pb"):
        old.unlink()
    path = mdir / "model.onnx"
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(module, args, str(path), input_names=list(feeds), opset_version=OPSET,
                          do_constant_folding=True, dynamo=False)
    m = onnx.load(str(path))
    for i, vi in enumerate(m.graph.input):
        make_models.save_tensor(feeds[vi.name], vi.name, ds / f"input_{i}.pb")
    if with_outputs:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        outs = sess.run(None, {vi.name: feeds[vi.name] for vi in m.graph.input})
        with torch.no_grad():
            ref = module(*args)
        ref = ref.to_tuple() if hasattr(ref, "to_tuple") else ref  # transformers' ModelOutput
        ref = [ref] if isinstance(ref, torch.Tensor) else [r for r in ref if isinstance(r, torch.Tensor)]
        for i, (vo, arr) in enumerate(zip(m.graph.output, outs)):
            want = ref[i].numpy() if i < len(ref) else None
            if want is None or want.shape != arr.shape:
                raise RuntimeError(f"{name}: output {i} ({vo.name}) is not torch's output {i}")
            err = float(np.max(np.abs(want - arr)) / max(1e-30, float(np.max(np.abs(want)))))
            if err > 1e-3:
                raise RuntimeError(f"{name}: onnxruntime's output {i} differs from torch's by {err:.2e}")
            make_models.save_tensor(arr, vo.name, ds / f"output_{i}.pb")
    flops = count_flops(name, module, args)
    print(f"{name:18s} {flops / 1e9:7.3f} GFLOP  {len(m.graph.node):5d} nodes  "
          f"{path.stat().st_size / 1e6:7.1f} MB  {time.time() - t0:5.1f} s  {path}", flush=True)
    return {"doc": MODELS[name][1], "flops": flops}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="models to export (default: all)")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--with-outputs", action="store_true",
                    help="also write onnxruntime's outputs as test_data_set_0/output_<i>.pb")
    ap.add_argument("--out-dir", type=Path, default=make_models.GENERATED)
    args = ap.parse_args()
    if args.list:
        for n, (_, doc) in MODELS.items():
            print(f"{n:18s} {doc}")
        return 0
    bad = [n for n in args.models if n not in MODELS]
    if bad:
        print(f"unknown model(s): {', '.join(bad)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    manifest_path = args.out_dir / make_models.TORCH_MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    failed = 0
    for n in args.models or list(MODELS):
        try:
            manifest[n] = export(n, args.with_outputs, args.out_dir)
        except Exception as e:  # keep exporting the others
            failed += 1
            print(f"{n}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
