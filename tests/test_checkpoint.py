"""Tests of geonp.checkpoint: round trips, atomic writes and every refusal."""

from __future__ import annotations

import os
import pickle

import pytest
import torch

import geonp.checkpoint as ckpt
from geonp.checkpoint import (
    FORMAT_VERSION,
    load_model,
    load_training_state,
    read_checkpoint,
    save_model,
    save_training_state,
)
from geonp.errors import CheckpointError, CheckpointNotFoundError
from geonp.models import Batch, build_model

TINY = dict(num_layers=1, token_dim=16, num_heads=2, head_dim=8, ff_hidden=(32,), embed_hidden=(32,), head_hidden=(32,))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors run fastest on one intra-op thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny(name: str = "bsa-tnp", **overrides):
    """Build a one-layer model small enough for CPU tests."""
    torch.manual_seed(0)
    return build_model(name, "small", space_dims=1, **{**TINY, **overrides})


def batch() -> Batch:
    """Two seeded 1-D tasks without target values."""
    g = torch.Generator().manual_seed(0)
    return Batch(xc=torch.rand(2, 7, 1, generator=g), yc=torch.randn(2, 7, 1, generator=g),
                 xt=torch.rand(2, 5, 1, generator=g))


@pytest.fixture
def saved(tmp_path):
    """Save a tiny BSA-TNP; return the checkpoint path."""
    return save_model(tiny(), tmp_path / "model.pt")


def rewrite(path, **changes):
    """Re-save a checkpoint's payload with some entries changed (None deletes)."""
    payload = read_checkpoint(path)
    for key, value in changes.items():
        if value is None:
            payload.pop(key)
        else:
            payload[key] = value
    torch.save(payload, path)
    return path


class Evil:
    """Unpickling it would create a marker file (a stand-in for arbitrary code)."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("name", ["bsa-tnp", "tnp-kr", "tnp-d", "te-tnp", "te-pt-tnp"])
def test_load_model__round_trip_predicts_identically(tmp_path, name):
    """A saved and reloaded model gives bit-identical predictions and keeps its metadata."""
    model = tiny(name).eval()
    path = save_model(model, tmp_path / "sub" / "m.pt", metadata={"data": "sine", "scores": [1.5, None]})
    loaded = load_model(path, expected_name=name)
    assert type(loaded) is type(model) and loaded.config == model.config and not loaded.training
    with torch.no_grad():
        a, b = model(batch()), loaded(batch())
    assert torch.equal(a.loc, b.loc) and torch.equal(a.scale, b.scale)
    payload = read_checkpoint(path)
    assert payload["format"] == "geonp-checkpoint" and payload["format_version"] == FORMAT_VERSION
    assert payload["model"] == name and payload["metadata"] == {"data": "sine", "scores": [1.5, None]}
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]


def test_load_model__keeps_float64(tmp_path):
    """A float64 model comes back in float64."""
    path = save_model(tiny().double(), tmp_path / "m.pt")
    assert next(load_model(path).parameters()).dtype == torch.float64


def test_load_model__reads_training_checkpoint(tmp_path):
    """load_model accepts a training checkpoint (current weights)."""
    model = tiny()
    opt = torch.optim.AdamW(model.parameters())
    path = save_training_state(tmp_path / "t.pt", model, optimizer=opt, state={"step": 3})
    assert torch.equal(load_model(path).head.mlp[0].weight, model.head.mlp[0].weight)


def test_training_state__round_trip(tmp_path):
    """Optimizer state and loop state come back; model weights are loaded in place."""
    model = tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.loss(Batch(**{**batch().__dict__, "yt": torch.zeros(2, 5, 1)})).backward()
    opt.step()
    state = {"step": 1, "rng": {"torch": torch.get_rng_state()}, "history": [{"loss": 1.0, "val": None}]}
    path = save_training_state(tmp_path / "t.pt", model, optimizer=opt, state=state)
    other = tiny()
    other_opt = torch.optim.AdamW(other.parameters(), lr=1e-3)
    loaded = load_training_state(path, other, optimizer=other_opt)
    assert loaded["step"] == 1 and loaded["history"] == state["history"] and "optimizer" not in loaded
    assert torch.equal(loaded["rng"]["torch"], state["rng"]["torch"])
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), other.parameters(), strict=True))
    sa, sb = opt.state_dict()["state"][0], other_opt.state_dict()["state"][0]
    assert torch.equal(sa["exp_avg"], sb["exp_avg"]) and torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])


def test_training_state__refuses_model_checkpoint_and_other_model(tmp_path, saved):
    """A plain model file has no training state; another model or config is refused."""
    with pytest.raises(CheckpointError, match="without training state"):
        load_training_state(saved, tiny())
    model = tiny()
    path = save_training_state(tmp_path / "t.pt", model, optimizer=torch.optim.AdamW(model.parameters()), state={})
    with pytest.raises(CheckpointError, match="'bsa-tnp' model; expected 'tnp-d'"):
        load_training_state(path, tiny("tnp-d"))
    with pytest.raises(CheckpointError, match=r"another bsa-tnp config: \(saved, given\) differ on \{'num_heads'"):
        load_training_state(path, tiny(num_heads=4))


def test_training_state__refuses_mismatched_optimizer(tmp_path):
    """Optimizer state of other parameter groups raises CheckpointError."""
    model = tiny()
    path = save_training_state(tmp_path / "t.pt", model, optimizer=torch.optim.AdamW(model.parameters()), state={})
    opt = torch.optim.AdamW([next(model.parameters())])
    with pytest.raises(CheckpointError, match="optimizer state that does not fit"):
        load_training_state(path, model, optimizer=opt)


def test_load_model__missing_file(tmp_path):
    """A missing file raises CheckpointNotFoundError, also a FileNotFoundError."""
    with pytest.raises(CheckpointNotFoundError, match="does not exist") as info:
        load_model(tmp_path / "nope.pt")
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, CheckpointError)


def test_load_model__directory(tmp_path):
    """A directory is not a checkpoint file."""
    with pytest.raises(CheckpointError, match="is a directory; expected a model file written by Model.save.*"
                                              "is an input, not a model"):
        load_model(tmp_path)


def test_load_model__text_file(tmp_path):
    """A text file is reported as not a torch zip archive."""
    path = tmp_path / "notes.pt"
    path.write_text("hello world\n")
    with pytest.raises(CheckpointError, match="not a geonp checkpoint: it is not a torch zip archive"):
        load_model(path)


def test_load_model__empty_file(tmp_path):
    """A zero-byte file is reported as empty."""
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match=r"is empty \(0 bytes\)"):
        load_model(path)


@pytest.mark.parametrize("obj", [[1, 2, 3], {"weight": torch.ones(2)}], ids=["list", "bare-state-dict"])
def test_load_model__other_torch_file(tmp_path, obj):
    """A torch.save of a list or of a bare state_dict is not a geonp checkpoint."""
    path = tmp_path / "other.pt"
    torch.save(obj, path)
    with pytest.raises(CheckpointError, match="is not a geonp checkpoint: it holds a"):
        load_model(path)


def test_load_model__truncated(saved):
    """A truncated file (interrupted copy) is reported as truncated or corrupt."""
    data = saved.read_bytes()
    saved.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_model(saved)


def test_load_model__corrupt_bytes(saved):
    """Flipped bytes inside the archive fail its CRC check."""
    data = bytearray(saved.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(saved)


def test_load_model__newer_format_version(saved):
    """A file of a newer format asks to upgrade geonp."""
    rewrite(saved, format_version=FORMAT_VERSION + 1)
    with pytest.raises(CheckpointError, match=f"format_version {FORMAT_VERSION + 1}.*Upgrade geonp"):
        load_model(saved)


def test_load_model__damaged_entries(saved):
    """A geonp checkpoint missing its entries is reported as damaged."""
    rewrite(saved, config=None)
    with pytest.raises(CheckpointError, match=r"damaged geonp checkpoint: entries \['config'\]"):
        load_model(saved)


def test_load_model__expected_name_differs(saved):
    """expected_name refuses a checkpoint of another model."""
    with pytest.raises(CheckpointError, match="holds a 'bsa-tnp' model; expected 'tnp-kr'"):
        load_model(saved, expected_name="tnp-kr")
    assert load_model(saved, expected_name="BSA_TNP").name == "bsa-tnp"


def test_load_model__unknown_model_or_bad_config(saved):
    """An unknown model name or an unbuildable config is a CheckpointError."""
    good = read_checkpoint(saved)
    rewrite(saved, model="convcnp")
    with pytest.raises(CheckpointError, match="'convcnp' model, which this geonp .* does not know"):
        load_model(saved)
    rewrite(saved, model="bsa-tnp", config={**good["config"], "num_heads": -1})
    with pytest.raises(CheckpointError, match="cannot build a bsa-tnp model"):
        load_model(saved)
    rewrite(saved, config={**good["config"], "colour": "red"})
    with pytest.raises(CheckpointError, match="colour"):
        load_model(saved)


def test_load_model__state_dict_mismatch(saved):
    """Missing keys, unexpected keys and shape mismatches are listed."""
    good = read_checkpoint(saved)
    sd = dict(good["state_dict"])
    sd.pop("head.mlp.0.bias")
    rewrite(saved, state_dict={**sd, "extra.weight": torch.ones(1)})
    expected = r"1 missing keys \['head.mlp.0.bias'\]; 1 unexpected keys \['extra.weight'\]"
    with pytest.raises(CheckpointError, match=expected):
        load_model(saved)
    rewrite(saved, state_dict=good["state_dict"], config={**good["config"], "token_dim": 8})
    with pytest.raises(CheckpointError, match=r"shape mismatches \(saved, expected\)"):
        load_model(saved)


def test_load_model__refuses_pickled_object(tmp_path):
    """A torch file holding an arbitrary object is refused as unsafe, and no code runs."""
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"format": "geonp-checkpoint", "format_version": 1, "payload": Evil(marker)}, path)
    with pytest.raises(CheckpointError, match="not a safe geonp checkpoint.*weights_only"):
        load_model(path)
    raw = tmp_path / "evil.pkl"
    raw.write_bytes(pickle.dumps(Evil(marker)))
    with pytest.raises(CheckpointError, match="not a torch zip archive"):
        load_model(raw)
    assert not marker.exists()


def test_save_model__refuses_non_plain_metadata(tmp_path):
    """Metadata that weights_only could not read back is refused before writing."""
    with pytest.raises(CheckpointError, match=r"metadata\['when'\] is a object; checkpoints hold only tensors"):
        save_model(tiny(), tmp_path / "m.pt", metadata={"when": object()})
    with pytest.raises(CheckpointError, match="metadata is a list; expected a dict"):
        save_model(tiny(), tmp_path / "m.pt", metadata=[1])
    with pytest.raises(CheckpointError, match="expected a geonp NeuralProcess"):
        save_model(torch.nn.Linear(1, 1), tmp_path / "m.pt")
    assert not list(tmp_path.iterdir())


def test_save_model__atomic_on_failure(saved, monkeypatch):
    """A write that fails midway leaves the previous file intact and no temporary file behind."""
    before = saved.read_bytes()

    def broken_save(obj, f):
        f.write(b"PK\x03\x04partial")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_model(tiny("tnp-kr"), saved)
    assert saved.read_bytes() == before and os.listdir(saved.parent) == [saved.name]
    assert load_model(saved).name == "bsa-tnp"


def test_save_model__refuses_str_subclasses_in_metadata(tmp_path):
    """A str subclass (e.g. torch.__version__) would pickle as an object: refused at save time."""
    with pytest.raises(CheckpointError, match=r"metadata\['torch'\] is a TorchVersion"):
        save_model(tiny("bsa-tnp"), tmp_path / "m.pt", metadata={"torch": torch.__version__})


@pytest.mark.parametrize("info, problem", [
    ({"name": "bsa-tnp"}, "KeyError: 'normaliser'"),
    ({"normaliser": {"bogus": 1}, "name": "bsa-tnp", "task": "infill", "variables": ["t2m"], "crs_wkt": None,
      "settings": {}}, "ConfigError: unknown Normaliser fields \\['bogus'\\]"),
    ({"normaliser": {}, "name": "bsa-tnp", "task": "infill", "variables": 3, "crs_wkt": None, "settings": {}},
     "TypeError"),
])
def test_geonp_load_model__damaged_model_metadata(tmp_path, info, problem):
    """A geonp model file whose model metadata is damaged is a CheckpointError that says what is wrong."""
    import geonp

    path = tmp_path / "bad.geonp"
    save_model(build_model("bsa-tnp", space_dims=2, time_dims=1), path, metadata={"geonp_model": info})
    with pytest.raises(CheckpointError, match=f"model metadata is damaged \\({problem}.*Save the model again"):
        geonp.load_model(path)
