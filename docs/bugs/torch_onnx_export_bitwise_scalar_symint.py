"""torch.onnx.export (dynamo): `bitwise_or` / `bitwise_and` / `bitwise_xor` of a tensor and a
symbolic int (a SymInt: a torch.while_loop's int counter, or a dynamic size) fails to translate
(dynsmith F46): "GraphConstructionError: Error when calling function
'TracedOnnxFunction(<function aten_bitwise_or_scalar ...>)' with args '[SymbolicTensor(...),
SymbolicTensor(name='arg0_1', type=Tensor(INT64), shape=Shape([]))]'", caused by
"TypeError: int() argument must be a string, a bytes-like object or a real number, not
'SymbolicTensor'". torch.export gives `aten.bitwise_or.Scalar(x, sym_int)`; onnxscript's
torchlib `aten_bitwise_or_scalar` (onnxscript/function_libs/torch_lib/ops/core.py, onnxscript
0.7.2) builds `op.Constant(value=ir.tensor(other, dtype=self.dtype))`, which needs a Python
int, while the exporter passes a symbolic scalar as a 0-d INT64 SymbolicTensor. `add`/`mul`
with the same SymInt export and agree with eager."""
import logging
import warnings

import torch

warnings.simplefilter("ignore")
logging.getLogger("torch.onnx").setLevel(logging.ERROR)


class LoopCounter(torch.nn.Module):  # the SymInt is a while_loop's int carry
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x, n):
        return torch.while_loop(lambda i, n, b: i < n,
                                lambda i, n, b: (i + 1, n.clone(), self.op(b, i)),
                                (0, n.clone(), x.clone()))[2]


class DynamicSize(torch.nn.Module):  # the SymInt is a dynamic size
    def forward(self, x):
        return torch.bitwise_or(x, x.shape[0])


def run(name, model, args, **kw):
    expected = model(*args).tolist()
    try:
        import onnxruntime as ort
        program = torch.onnx.export(model, args, dynamo=True, report=False, verbose=False, **kw)
        s = ort.InferenceSession(program.model_proto.SerializeToString())
        got = s.run(None, {i.name: a.numpy() for i, a in zip(s.get_inputs(), args)})[0].tolist()
        print(f"{name}: eager {expected}, onnxruntime {got}")
    except Exception as e:
        c = e
        while c.__cause__ is not None:
            c = c.__cause__
        print(f"{name}: eager {expected}, export failed: {type(c).__name__}: {str(c)[:90]}")


x, n = torch.tensor([1, 2]), torch.tensor(3)
for op in (torch.bitwise_or, torch.bitwise_and, torch.bitwise_xor, torch.add, torch.mul):
    run(f"while_loop counter, {op.__name__}", LoopCounter(op), (x, n))
run("dynamic size, bitwise_or", DynamicSize(), (torch.tensor([1, 2, 4]),),
    dynamic_shapes=({0: torch.export.Dim.DYNAMIC},))
# while_loop counter, bitwise_or: eager [3, 3], export failed: TypeError: int() argument must be a string, a bytes-like object or a real number, not 'SymbolicTensor'
# while_loop counter, bitwise_and: eager [0, 0], export failed: TypeError: (the same)
# while_loop counter, bitwise_xor: eager [2, 1], export failed: TypeError: (the same)
# while_loop counter, add: eager [4, 5], onnxruntime [4, 5]
# while_loop counter, mul: eager [0, 0], onnxruntime [0, 0]
# dynamic size, bitwise_or: eager [3, 3, 7], export failed: TypeError: (the same)
