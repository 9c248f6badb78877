"""I/O binding, shaped like ONNX Runtime's: InferenceSession.io_binding() returns an IOBinding; bind each input
(read in place, strided views welcome) and any output to a buffer of yours (written in place where the model
can), then InferenceSession.run_with_iobinding(binding). get_outputs() gives the bound buffers themselves and
what the run allocated for the others.

A decoder's key/value cache stays in one buffer this way: where an output is Concat(an input, this step's
positions) along an axis, bind the input to a view of the buffer holding the past positions and the output to
the same buffer's view one step longer (numpy: ``cache[:, :, :past]`` and ``cache[:, :, :past + seq]`` of a
``cache`` with room along axis 2). The run then writes only the new positions and attention reads the cache
where it is; session.stats()["binding_copies"] counts the copies a binding still cost (0 when none)."""

from ._errors import InvalidArgument


class IOBinding:
    """Inputs and outputs bound to a session's model (InferenceSession.io_binding())."""

    def __init__(self, session):
        self._session = session
        self._input_names = [i.name for i in session.get_inputs()]
        self._output_names = [o.name for o in session.get_outputs()]
        self._inputs = {}
        self._outputs = {}
        self._results = None

    def bind_input(self, name, value):
        """Binds input ``name`` to ``value`` (a numpy array, a torch tensor or anything with ``__dlpack__``),
        read in place at each run until bound again; a strided view (a slice of a larger buffer) is read
        where it is when the model's nodes that read it can, else copied for them."""
        if name not in self._input_names:
            raise InvalidArgument("unknown input %r (the model's inputs: %s)" % (name, ", ".join(self._input_names)))
        self._inputs[name] = value

    def bind_cpu_input(self, name, value):
        """ONNX Runtime's name for bind_input."""
        self.bind_input(name, value)

    def bind_output(self, name, buffer=None):
        """Binds output ``name`` to ``buffer`` (a writeable numpy array or a tensor with ``__dlpack__``, of the
        output's dtype and of the shape the run makes; strided views allowed), written in place where the
        model can and copied in otherwise; or, with no buffer, lets each run allocate it."""
        if name not in self._output_names:
            raise InvalidArgument("unknown output %r (the model's outputs: %s)" % (name, ", ".join(self._output_names)))
        self._outputs[name] = buffer

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = {}

    def get_outputs(self):
        """The last run's outputs in model order: each bound buffer itself, or the array the run allocated."""
        if self._results is None:
            raise InvalidArgument("nothing has run with this binding yet (InferenceSession.run_with_iobinding)")
        return list(self._results)

    def copy_outputs_to_cpu(self):
        """Copies of the last run's outputs as numpy arrays."""
        import numpy as np
        return [np.array(r, copy=True) for r in self.get_outputs()]

    def _run(self, model):
        missing = [n for n in self._input_names if n not in self._inputs]
        if missing:
            raise InvalidArgument("input(s) not bound: %s" % ", ".join(missing))
        from . import _prepare_input
        inputs = [_prepare_input(self._inputs[n]) for n in self._input_names]
        outputs = [self._outputs.get(n) for n in self._output_names]
        self._results = model.run_bound(inputs, outputs)
