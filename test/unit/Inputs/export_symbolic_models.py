"""Writes bert-dynamic.onnx, gpt-dynamic.onnx, gpt-heads16-dynamic.onnx (two heads of 16: what
the fused CUDA attention kernel takes in f16/bf16), decoder-dynamic.onnx, cnn-dynamic.onnx and
ops-dynamic.onnx (pads of every mode, concats along fixed and symbolic axes, a grouped dilated
convolution, argmax, a KV-cache concat on dynamic axes): small
BERT- and GPT-style blocks (the decoder slices a causal buffer to the sequence and returns the
last position), and cnn-dynamo.onnx (the CNN through torch.export, whose
dims are s0, 2*s3, 2*s4) and a small CNN (dynamic batch and image size) exported by
torch.onnx.export (TorchScript exporter, opset 17) with dynamic batch and sequence axes, the way
users export them: positions from arange(seq), heads split by view/transpose on x.shape, a
padding mask (BERT) or a causal triu mask (GPT). Random weights, seeded.

  .venv-peers/bin/python test/unit/Inputs/export_symbolic_models.py test/unit/Inputs

The files are committed; SymbolicShapeTest reads them (no torch needed to run the tests).
bench/symbolic_cpu.py imports the model classes with larger sizes.
"""
import torch, torch.nn as nn, sys, math
class Bert(nn.Module):  # hand-written attention, as HF exports it
    def __init__(s, V=100, D=16, H=4, P=64):
        super().__init__()
        s.H, s.D = H, D
        s.tok = nn.Embedding(V, D); s.pos = nn.Embedding(P, D); s.ln = nn.LayerNorm(D)
        s.qkv = nn.Linear(D, 3 * D); s.o = nn.Linear(D, D); s.ff1 = nn.Linear(D, 4 * D); s.ff2 = nn.Linear(4 * D, D)
        s.ln2 = nn.LayerNorm(D); s.ln3 = nn.LayerNorm(D)
    def forward(s, ids, mask):
        B, S = ids.shape
        pos = torch.arange(S).unsqueeze(0)
        x = s.ln(s.tok(ids) + s.pos(pos))
        q, k, v = s.qkv(x).split(s.D, dim=-1)
        sh = lambda t: t.view(B, S, s.H, s.D // s.H).transpose(1, 2)
        q, k, v = sh(q), sh(k), sh(v)
        sc = q @ k.transpose(-1, -2) / math.sqrt(s.D // s.H)
        sc = sc + (1.0 - mask[:, None, None, :].float()) * -10000.0
        a = (sc.softmax(-1) @ v).transpose(1, 2).reshape(B, S, s.D)
        x = s.ln2(x + s.o(a))
        x = s.ln3(x + s.ff2(torch.nn.functional.gelu(s.ff1(x))))
        return x
class Gpt(nn.Module):
    def __init__(s, V=100, D=16, H=4, P=64):
        super().__init__()
        s.H, s.D = H, D
        s.tok = nn.Embedding(V, D); s.pos = nn.Embedding(P, D)
        s.qkv = nn.Linear(D, 3 * D); s.o = nn.Linear(D, D); s.ln = nn.LayerNorm(D); s.lm = nn.Linear(D, V)
    def forward(s, ids):
        B, S = ids.shape
        x = s.tok(ids) + s.pos(torch.arange(S).unsqueeze(0))
        h = s.ln(x)
        q, k, v = s.qkv(h).split(s.D, dim=-1)
        sh = lambda t: t.view(B, S, s.H, s.D // s.H).transpose(1, 2)
        q, k, v = sh(q), sh(k), sh(v)
        sc = q @ k.transpose(-1, -2) / math.sqrt(s.D // s.H)
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
        sc = sc.masked_fill(causal, float("-inf"))
        a = (sc.softmax(-1) @ v).transpose(1, 2).reshape(B, S, s.D)
        return s.lm(x + s.o(a))
class Decoder(nn.Module):  # GPT-2 as transformers writes it: a causal buffer sliced to seq
    def __init__(s, V=100, D=16, H=4, P=64):
        super().__init__()
        s.H, s.D = H, D
        s.tok = nn.Embedding(V, D); s.pos = nn.Embedding(P, D)
        s.qkv = nn.Linear(D, 3 * D); s.o = nn.Linear(D, D); s.lm = nn.Linear(D, V)
        s.register_buffer("bias", torch.tril(torch.ones(P, P, dtype=torch.bool)).view(1, 1, P, P))
    def forward(s, ids):
        B, S = ids.shape
        x = s.tok(ids) + s.pos(torch.arange(S).unsqueeze(0))
        q, k, v = s.qkv(x).split(s.D, dim=-1)
        sh = lambda t: t.view(B, S, s.H, s.D // s.H).transpose(1, 2)
        q, k, v = sh(q), sh(k), sh(v)
        sc = q @ k.transpose(-1, -2) / math.sqrt(s.D // s.H)
        sc = torch.where(s.bias[:, :, :S, :S], sc, torch.tensor(-1e4))
        a = (sc.softmax(-1) @ v).transpose(1, 2).reshape(B, S, s.D)
        h = x + s.o(a)
        # The last position's logits, and the mean of every position after the first.
        return s.lm(h[:, -1:, :]), h[:, 1:, :].mean(1)
class OpsMix(nn.Module):  # pads, concats, a grouped dilated conv, argmax, a KV-cache concat, cumsums, top-k, argmax over a symbolic dim, nearest upsampling, scatters
    def __init__(s):
        super().__init__()
        s.dw = nn.Conv2d(4, 4, 3, groups=2, dilation=2, padding=2); s.q = nn.Linear(8, 8)
    def forward(s, x, t, past):
        F = nn.functional
        a = F.pad(x, (1, 2, 2, 1), mode="reflect") + 1.0
        b = F.pad(x, (1, 1, 1, 1), mode="replicate") * 2.0
        c = F.pad(x, (0, 1, 0, 1), value=0.5)
        img = torch.cat([s.dw(x), x * 3.0], dim=1)  # channels: static axis, symbolic h and w
        cls = torch.argmax(img, dim=1).float()
        kv = torch.cat([past, t], dim=1)  # along the symbolic sequence: past + seq
        att = (s.q(t) @ kv.transpose(1, 2)).softmax(-1) @ kv
        pos = torch.cumsum((t[..., 0] > 0).long(), dim=1).float()  # RoBERTa's position ids
        rev = torch.cumsum(t.flip(1), dim=1)  # a float cumsum along the symbolic sequence
        top, where = torch.topk(x.mean(1), 3, dim=-1)  # along the symbolic width (w >= 3)
        best = torch.argmax(t.sum(-1), dim=1).float()  # along the symbolic sequence
        up = F.interpolate(x, scale_factor=2, mode="nearest") + F.pad(x, (1, 1, 1, 1)).mean()
        up3 = F.interpolate(x[:, :1], scale_factor=(3, 1), mode="nearest")
        summed = torch.zeros_like(t).scatter_add(1, torch.zeros_like(t, dtype=torch.long), t)
        cached = t.clone()
        cached[:, 0] = past[:, 0]  # a cache write: ScatterND
        return (a.sum((2, 3)), b.mean((2, 3)) + c.mean((2, 3)), img, cls, att, pos, rev, top,
                where.float(), best, up, up3, summed, cached)
class Cnn(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1 = nn.Conv2d(3, 8, 3, padding=1); s.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1); s.fc = nn.Linear(16, 10)
    def forward(s, x):
        x = torch.relu(s.c1(x)); x = nn.functional.max_pool2d(x, 2); x = torch.relu(s.c2(x))
        return s.fc(x.mean((2, 3)))


def export_all(out):
    torch.manual_seed(0)
    ids = torch.randint(0, 100, (2, 7)); mask = torch.ones(2, 7, dtype=torch.int64)
    for name, m, args, names, axes in [
        ("bert-dynamic", Bert().eval(), (ids, mask), ["ids", "mask"], {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}),
        ("gpt-dynamic", Gpt().eval(), (ids,), ["ids"], {"ids": {0: "batch", 1: "seq"}}),
        ("gpt-heads16-dynamic", Gpt(D=32, H=2).eval(), (ids,), ["ids"], {"ids": {0: "batch", 1: "seq"}}),
        ("decoder-dynamic", Decoder().eval(), (ids,), ["ids"], {"ids": {0: "batch", 1: "seq"}}),
        ("cnn-dynamic", Cnn().eval(), (torch.randn(2, 3, 32, 32),), ["x"], {"x": {0: "batch", 2: "h", 3: "w"}}),
        ("ops-dynamic", OpsMix().eval(), (torch.randn(2, 4, 9, 7), torch.randn(2, 5, 8), torch.randn(2, 3, 8)),
         ["x", "t", "past"], {"x": {0: "batch", 2: "h", 3: "w"}, "t": {0: "batch", 1: "seq"}, "past": {0: "batch", 1: "past"}}),
        ]:
        torch.onnx.export(m, args, f"{out}/{name}.onnx", input_names=names, dynamic_axes=axes, opset_version=17, dynamo=False)
        print("wrote", name)
    # torch.export (dynamo) names dims s0, s1, ... and writes a dim it derived as an expression:
    # the CNN's image sides become 2*s3 and 2*s4 (the max pooling halves them).
    dim = torch.export.Dim
    torch.onnx.export(Cnn().eval(), (torch.randn(2, 3, 32, 32),), f"{out}/cnn-dynamo.onnx", dynamo=True, external_data=False,
                      dynamic_shapes={"x": {0: dim("batch", max=64), 2: dim("h", min=8, max=256),
                                            3: dim("w", min=8, max=256)}})
    print("wrote cnn-dynamo")


if __name__ == "__main__":
    export_all(sys.argv[1])
