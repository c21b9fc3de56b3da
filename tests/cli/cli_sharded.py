#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""CLI end to end, sharded checkpoints (issue 43, item 3; docs/formats.md, "Sharded checkpoints"):
an index (model.safetensors.index.json, pytorch_model.bin.index.json) given to encode is one
snapshot of all its shards, in the index's order. Fixtures by tests/fixtures/fixtures_sharded.py
(safetensors shards written per the specification, .bin shards by real torch.save), made here
into the work directory. The lossless preset round-trips them bit-exactly (checked against the
shards read on their own); every refusal — a missing or unreadable shard, an extra tensor in a
shard, a tensor listed twice, a name mapped to a shard that lacks it, a shard path leaving the
index's directory, malformed JSON — exits 2 with one error line naming the entry and leaves no
output. Lazy opening is tested in tests/formats/test_sharded.cpp."""
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import clitest
import fixtures_safetensors
import fixtures_sharded
from clitest import fails, path, run

FX = path("fx")
fixtures_sharded.make(FX)
ORDER = [n for n, _ in fixtures_sharded.ORDER]
ST = os.path.join(FX, "st")
PT = os.path.join(FX, "pt")
SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def read_safetensors(p):
    """[(name, dtype, shape, raw bytes)] of a safetensors file, in data-offset order."""
    with open(p, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    body = blob[8 + n:]
    items = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    return [(k, v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in items]


def shard_tensors():
    """{name: (dtype, shape, raw bytes)} of both safetensors shards, read on their own."""
    out = {}
    for s in (SHARD1, SHARD2):
        for name, dtype, shape, raw in read_safetensors(os.path.join(ST, s)):
            out[name] = (dtype, shape, raw)
    return out


def tensor_names(gcz):
    info = json.loads(run("inspect", gcz, "--json", "--no-decode")[0])
    return info, [t["name"] for t in info["frames"][0]["tensors"]]


def test_safetensors_shards_round_trip_bit_exactly_in_the_index_order():
    gcz = path("st.gcz")
    _, err = run("encode", os.path.join(ST, "model.safetensors.index.json"), "-o", gcz, "--preset", "lossless",
                 "--pass-through", "--quiet")
    info, names = tensor_names(gcz)
    assert info["inputs"][0]["format"] == "sharded", info["inputs"]
    assert info["inputs"][0].get("metadata") == {"format": "pt"}, info["inputs"][0]
    assert names == ORDER, names  # the index's order: neither sorted nor grouped by shard
    out = path("st_back.safetensors")
    run("decode", gcz, "-o", out)
    back = read_safetensors(out)
    assert [b[0] for b in back] == ORDER, [b[0] for b in back]
    want = shard_tensors()
    assert len(want) == len(ORDER)
    for name, dtype, shape, raw in back:
        assert (dtype, shape, raw) == want[name], f"{name}: {(dtype, shape)} != {want[name][:2]} or values differ"
    # and through NPZ, compared with numpy (bfloat16, which numpy lacks, is written as float32)
    run("decode", gcz, "-o", path("st_back.npz"))
    with np.load(path("st_back.npz")) as z:
        assert list(z.files) == ORDER, z.files
        for name in ("layers.2.w", "embed", "head.h16", "head.f64", "steps", "empty"):
            dtype, shape, raw = want[name]
            np_dtype = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8"}[dtype]
            src = np.frombuffer(raw, dtype=np_dtype).reshape(shape)
            assert z[name].dtype == src.dtype and z[name].shape == src.shape, name
            assert z[name].tobytes() == src.tobytes(), name  # bit-exact: NaN, -0.0, subnormals


def test_torch_shards_round_trip_bit_exactly_in_the_index_order():
    gcz = path("pt.gcz")
    run("encode", os.path.join(PT, "pytorch_model.bin.index.json"), "-o", gcz, "--preset", "lossless",
        "--pass-through", "--quiet")
    info, names = tensor_names(gcz)
    assert info["inputs"][0]["format"] == "sharded" and names == ORDER, (info["inputs"], names)
    out = path("pt_back.pt")
    run("decode", gcz, "-o", out)
    back = torch.load(out, weights_only=True)
    assert list(back) == ORDER, list(back)
    src = {}
    for k in (1, 2):
        src.update(torch.load(os.path.join(PT, f"pytorch_model-0000{k}-of-00002.bin")))
    for name in ORDER:
        a, b = src[name], back[name]
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if a.dtype == torch.bfloat16:
            a, b = a.view(torch.int16), b.view(torch.int16)
        assert a.numpy().tobytes() == b.numpy().tobytes(), name


def test_inspect_lists_the_tensors_and_encode_names_the_skipped_one():
    gcz = path("st_skip.gcz")
    _, err = run("encode", os.path.join(ST, "model.safetensors.index.json"), "-o", gcz, "--preset", "lossless")
    assert "skipping tensor 'steps'" in err, err
    out, _ = run("inspect", gcz, "--tensors")
    text = out.decode()
    at = [text.find(n) for n in ORDER if n != "steps"]
    assert all(a >= 0 for a in at) and at == sorted(at), text  # every tensor, in the index's order
    # an index's name is told in any case
    shutil.copytree(ST, path("upper"))
    os.rename(path("upper", "model.safetensors.index.json"), path("upper", "MODEL.SafeTensors.Index.JSON"))
    run("encode", path("upper", "MODEL.SafeTensors.Index.JSON"), "-o", path("upper.gcz"), "--quiet")
    assert tensor_names(path("upper.gcz"))[1] == [n for n in ORDER if n != "steps"]


def test_an_index_given_where_a_container_is_expected_is_said_as_such():
    idx = os.path.join(ST, "model.safetensors.index.json")
    for args in (["inspect", idx], ["decode", idx, "-o", path("never.npz")], ["merge", idx, idx, "--method", "mean", "-o", path("m.gcz")]):
        fails(*args, code=2, contains="this is a sharded checkpoint's index, not a gradcodec container")
    assert not os.path.exists(path("never.npz")) and not os.path.exists(path("m.gcz"))
    # other JSON stays what it was: not a container (exit 3)
    with open(path("other.json"), "w") as f:
        f.write('{"weights": {}, "note": "JSON that is not an index, long enough to hold a preamble"}' * 4)
    fails("inspect", path("other.json"), code=3, contains="not a .gcz container")


# --- refusals: each a copy of a good set with one thing wrong ---------------------------------------

def index_entries(src=ST, name="model.safetensors.index.json"):
    return list(json.load(open(os.path.join(src, name)))["weight_map"].items())


def variant(case, src=ST, index=None, text=None, name="model.safetensors.index.json"):
    """A copy of `src` in its own directory, the index replaced by `index` entries (or raw `text`);
    returns the index's path."""
    d = path("bad", case)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d)
    if index is not None:
        text = fixtures_sharded.index_text(index)
    if text is not None:
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return os.path.join(d, name)


def refused(idx, *contains):
    out = path("refused.gcz")
    line = fails("encode", idx, "-o", out, "--preset", "lossless", code=2, contains=(os.path.basename(idx),) + contains)
    assert not os.path.exists(out), f"{idx}: an output was left"
    return line


def test_a_missing_or_unreadable_shard_is_refused_naming_it():
    idx = variant("missing")
    os.remove(os.path.join(os.path.dirname(idx), SHARD2))
    refused(idx, f"shard '{SHARD2}'", "cannot open")
    idx = variant("directory")
    d = os.path.dirname(idx)
    os.remove(os.path.join(d, SHARD2))
    os.mkdir(os.path.join(d, SHARD2))
    refused(idx, f"shard '{SHARD2}'", "not a regular file")
    idx = variant("not_a_shard")
    np.savez(os.path.join(os.path.dirname(idx), "x.npz"), a=np.zeros(2))
    os.rename(os.path.join(os.path.dirname(idx), "x.npz"), os.path.join(os.path.dirname(idx), SHARD2))
    refused(idx, f"shard '{SHARD2}'", "not a safetensors or torch.save shard")
    idx = variant("garbage")
    with open(os.path.join(os.path.dirname(idx), SHARD2), "wb") as f:
        f.write(b"hello, not a tensor file")
    refused(idx, f"shard '{SHARD2}'", "neither a safetensors file nor a torch.save zip")
    idx = variant("corrupt")  # a shard the safetensors reader refuses: its reason is kept
    with open(os.path.join(os.path.dirname(idx), SHARD2), "r+b") as f:
        f.truncate(os.path.getsize(f.name) - 4)
    refused(idx, f"shard '{SHARD2}'", "safetensors:")


def test_an_extra_tensor_in_a_shard_is_refused_naming_it():
    # shard 1 holds a tensor the index does not list at all
    idx = variant("extra")
    a = fixtures_sharded.arrays()
    tensors = [(n, a[n][0], a[n][1]) for n, s in sorted(fixtures_sharded.ORDER) if s == 1]
    fixtures_sharded.write_safetensors(os.path.join(os.path.dirname(idx), SHARD1),
                                       tensors + [("extra.w", "F32", np.ones(3, np.float32))])
    refused(idx, f"shard '{SHARD1}' holds tensor 'extra.w', which the index does not list")
    # the index maps a tensor of shard 1 to shard 2 (a tensor in the wrong shard)
    entries = [(n, SHARD2 if n == "embed" else f) for n, f in index_entries()]
    refused(variant("moved", index=entries), f"shard '{SHARD1}' holds tensor 'embed' not listed for it",
            f"maps it to shard '{SHARD2}'")


def test_a_tensor_listed_twice_is_refused():
    text = open(os.path.join(ST, "model.safetensors.index.json")).read()
    twice = text.replace('"embed": "%s",' % SHARD1, '"embed": "%s",\n    "embed": "%s",' % (SHARD1, SHARD1))
    assert twice != text
    refused(variant("twice", text=twice), "weight_map lists tensor 'embed' twice")
    other = text.replace('"embed": "%s",' % SHARD1, '"embed": "%s",\n    "embed": "%s",' % (SHARD1, SHARD2))
    refused(variant("twice_other", text=other), "weight_map lists tensor 'embed' twice")
    root = text.replace('"metadata"', '"weight_map": {},\n  "metadata"', 1)
    refused(variant("two_maps", text=root), "duplicate key 'weight_map'")


def test_a_name_mapped_to_a_shard_that_lacks_it_is_refused():
    entries = index_entries() + [("ghost", SHARD2)]
    refused(variant("ghost", index=entries), f"maps tensor 'ghost' to shard '{SHARD2}', which does not hold it")


def test_a_shard_path_leaving_the_index_directory_is_refused():
    # refused by its name alone, even when the file it names is a good shard
    outside = os.path.abspath(os.path.join(ST, SHARD2))
    for case, target, why in [
            ("absolute", outside, "is an absolute path"),
            ("dotdot", "../../fx/st/" + SHARD2, "has a '..' part"),
            ("dotdot_inside", "sub/../" + SHARD2, "has a '..' part"),
            ("empty", "", "is empty")]:
        entries = [(n, target if f == SHARD2 else f) for n, f in index_entries()]
        refused(variant(case, index=entries), f"tensor 'layers.10.w' to shard '{target}', which {why}")
    # a subdirectory of the index's directory is fine, and "./x" is the same shard as "x"
    idx = variant("subdir", index=[(n, "sub/" + f if f == SHARD2 else "./" + f) for n, f in index_entries()])
    d = os.path.dirname(idx)
    os.mkdir(os.path.join(d, "sub"))
    os.rename(os.path.join(d, SHARD2), os.path.join(d, "sub", SHARD2))
    run("encode", idx, "-o", path("subdir.gcz"), "--quiet")


def test_malformed_indexes_are_refused():
    good = open(os.path.join(ST, "model.safetensors.index.json")).read()
    for case, text, why in [
            ("truncated", good[:len(good) // 2], "invalid JSON"),
            ("not_object", "[1, 2]", "the index is not a JSON object"),
            ("no_map", '{"metadata": {"total_size": 1}}', 'no "weight_map"'),
            ("map_array", '{"weight_map": ["a", "b"]}', "weight_map is not an object (an array)"),
            ("map_string", '{"weight_map": "model.safetensors"}', "weight_map is not an object (a string)"),
            ("number", '{"weight_map": {"embed": 3}}', "maps tensor 'embed' to a number, not a shard file name"),
            ("null", '{"weight_map": {"embed": null}}', "maps tensor 'embed' to null"),
            ("object", '{"weight_map": {"embed": {"file": "x"}}}', "maps tensor 'embed' to an object"),
            ("deep", '{"metadata": ' + "[" * 200 + "]" * 200 + "}", "nested more than 128 levels")]:
        refused(variant(case, text=text), why)
    # an empty weight_map is an empty snapshot: nothing to encode
    refused(variant("empty_map", text='{"metadata": {}, "weight_map": {}}'), "no floating-point tensor")


def test_torch_shards_are_checked_as_safetensors_ones():
    name = "pytorch_model.bin.index.json"
    idx = variant("pt_extra", src=PT, name=name)
    shard = os.path.join(os.path.dirname(idx), "pytorch_model-00002-of-00002.bin")
    sd = torch.load(shard)
    sd["extra.w"] = torch.ones(2)
    torch.save(sd, shard)
    refused(idx, "shard 'pytorch_model-00002-of-00002.bin' holds tensor 'extra.w', which the index does not list")
    idx = variant("pt_legacy", src=PT, name=name)
    shard = os.path.join(os.path.dirname(idx), "pytorch_model-00001-of-00002.bin")
    torch.save(torch.load(shard), shard, _use_new_zipfile_serialization=False)
    refused(idx, "shard 'pytorch_model-00001-of-00002.bin'", "legacy format")


def test_warnings_name_the_shard_and_differing_metadata_is_not_kept():
    # a value of a torch shard that is not a tensor is no extra tensor: a warning names it and its shard
    name = "pytorch_model.bin.index.json"
    idx = variant("pt_step", src=PT, name=name)
    shard = os.path.join(os.path.dirname(idx), "pytorch_model-00002-of-00002.bin")
    sd = torch.load(shard)
    sd["step"] = 5
    torch.save(sd, shard)
    _, err = run("encode", idx, "-o", path("pt_step.gcz"), "--preset", "lossless")
    assert "shard 'pytorch_model-00002-of-00002.bin': 1 value(s) that are not tensors (the first: 'step')" in err, err
    # safetensors shards whose __metadata__ differ: none is kept, and a warning says so
    idx = variant("metadata")
    a = fixtures_sharded.arrays()
    items, body, _ = fixtures_safetensors.layout(
        [fixtures_safetensors.t(n, a[n][0], a[n][1]) for n, s in sorted(fixtures_sharded.ORDER) if s == 2])
    with open(os.path.join(os.path.dirname(idx), SHARD2), "wb") as f:
        f.write(fixtures_safetensors.raw_file(fixtures_safetensors.header_text(items, metadata={"format": "np"}), body))
    _, err = run("encode", idx, "-o", path("metadata.gcz"), "--preset", "lossless")
    assert "__metadata__ differ: none is kept" in err, err
    info, names = tensor_names(path("metadata.gcz"))
    assert "metadata" not in info["inputs"][0] and len(names) == len(ORDER) - 1, info["inputs"]


if __name__ == "__main__":
    clitest.run_all(globals())
