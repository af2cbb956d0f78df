"""Sequence models built on torch.nn's recurrent layers, which PyTorch's exporters write as ONNX
LSTM and GRU nodes: zoo.py times them and pickles them for its torch engine (so the class lives
in a module of its own, importable there and not imported by the other engines)."""
from torch import nn


class Recurrent(nn.Module):
    """An embedding, two recurrent layers and a linear head over every step: a bidirectional
    LSTM tagger (256 units each way), or a GRU encoder (512 units)."""

    def __init__(self, kind):
        super().__init__()
        self.embed = nn.Embedding(1000, 256)
        self.rnn = (nn.LSTM(256, 256, num_layers=2, bidirectional=True, batch_first=True)
                    if kind == "bilstm_tagger" else nn.GRU(256, 512, num_layers=2, batch_first=True))
        self.head = nn.Linear(512, 32)

    def forward(self, input_ids):
        return self.head(self.rnn(self.embed(input_ids))[0])
