"""ONNX sequences, optionals and string tensors through tessera.InferenceSession: lists of arrays in and
out for sequences, None or the content for optionals, numpy str arrays for string tensors; results
against numpy and plain-Python references; every wrong kind of input as tessera.InvalidArgument."""

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessera

F, I64, S, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING, TensorProto.BOOL


def make_model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tensor(name, elem, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def seq(name, elem, shape=None):
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape)))


def opt_tensor(name, elem, shape=None):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, shape)))


def opt_seq(name, elem, shape=None):
    inner = helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape))
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def assert_arrays_equal(got, want):
    """got: a list of numpy arrays equal in dtype, shape and value to want's."""
    assert isinstance(got, list), type(got)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, np.ndarray)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)


# ------------------------------------------------------------------------------------ sequences --

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_to_sequence_equal_parts_matches_np_split(axis):
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=axis)],
                       [tensor("x", F, [3, 4])], [seq("s", F)])
    x = rand(3, 4)
    (parts,) = tessera.InferenceSession(model).run(None, {"x": x})
    assert_arrays_equal(parts, np.split(x, x.shape[axis], axis=axis))


def test_split_to_sequence_keepdims_0_squeezes_the_axis():
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0)],
                       [tensor("x", F, [3, 4])], [seq("s", F)])
    x = rand(3, 4)
    (parts,) = tessera.InferenceSession(model).run(None, {"x": x})
    assert_arrays_equal(parts, [x[:, i] for i in range(4)])


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 9])
def test_split_to_sequence_scalar_split_given_at_run_time(chunk):
    """A scalar split: chunks of that size, the last one smaller; the sequence's length is only known
    after running."""
    model = make_model([helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=0)],
                       [tensor("x", F, [7, 2]), tensor("split", I64, [])], [seq("s", F)])
    session = tessera.InferenceSession(model)
    x = rand(7, 2, seed=chunk)
    (parts,) = session.run(None, {"x": x, "split": np.array(chunk, np.int64)})
    assert_arrays_equal(parts, np.split(x, list(range(chunk, 7, chunk)), axis=0))


def test_split_to_sequence_lengths_match_np_array_split():
    """Split lengths as np.array_split makes them (the first ones one longer)."""
    model = make_model([helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1)],
                       [tensor("x", F, [2, 10]), tensor("split", I64, [3])], [seq("s", F)])
    x = rand(2, 10)
    want = np.array_split(x, 3, axis=1)
    lengths = np.array([w.shape[1] for w in want], np.int64)
    assert list(lengths) == [4, 3, 3]
    (parts,) = tessera.InferenceSession(model).run(None, {"x": x, "split": lengths})
    assert_arrays_equal(parts, want)


@pytest.mark.parametrize("axis,new_axis", [(0, 0), (1, 0), (-1, 0), (0, 1), (1, 1), (2, 1), (-1, 1)])
def test_sequence_construct_and_concat_from_sequence_match_concatenate_and_stack(axis, new_axis):
    model = make_model([helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
                        helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)],
                       [tensor(n, F, [2, 3]) for n in "abc"], [tensor("y", F, None)])
    a, b, c = rand(2, 3, seed=1), rand(2, 3, seed=2), rand(2, 3, seed=3)
    (y,) = tessera.InferenceSession(model).run(None, {"a": a, "b": b, "c": c})
    want = np.stack([a, b, c], axis=axis) if new_axis else np.concatenate([a, b, c], axis=axis)
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want)


def sequence_input_model():
    """s: a sequence input of float tensors of any shape -> its length and its last tensor."""
    return make_model([helper.make_node("SequenceLength", ["s"], ["n"]),
                       helper.make_node("Constant", [], ["last"], value=numpy_helper.from_array(np.array(-1, np.int64))),
                       helper.make_node("SequenceAt", ["s", "last"], ["t"], name="at_last")],
                      [seq("s", F)], [tensor("n", I64, []), tensor("t", F, None)])


@pytest.mark.parametrize("items", [
    [np.float32(1.5) * np.ones((2, 2), np.float32)],
    [rand(3, seed=1), rand(2, 5, seed=2), rand(4, 1, 2, seed=3)],
    tuple(rand(k, seed=k) for k in range(1, 6)),
])
def test_sequence_input_length_and_last_item(items):
    session = tessera.InferenceSession(sequence_input_model())
    n, t = session.run(None, {"s": items})
    assert n.dtype == np.int64 and n.shape == () and int(n) == len(items)
    assert t.dtype == np.float32 and t.shape == items[-1].shape
    np.testing.assert_array_equal(t, items[-1])


def test_sequence_items_may_be_array_likes_and_non_contiguous_arrays():
    session = tessera.InferenceSession(sequence_input_model())
    x = rand(4, 6)
    n, t = session.run(None, {"s": [[1.0, 2.0], x[:, ::2]]})
    assert int(n) == 2
    np.testing.assert_array_equal(t, x[:, ::2])
    n, t = session.run(None, {"s": [x, [[1, 2], [3, 4]]]})  # ints converted to the sequence's dtype
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t, np.array([[1, 2], [3, 4]], np.float32))


def test_sequence_at_out_of_range_names_the_node():
    session = tessera.InferenceSession(sequence_input_model())
    with pytest.raises(tessera.InvalidArgument, match="at_last"):
        session.run(None, {"s": []})  # SequenceAt(-1) of an empty sequence


@pytest.mark.parametrize("position", [0, 1, 3, -1, -4, 4, -5, 10])
def test_sequence_at_positions(position):
    model = make_model([helper.make_node("SequenceAt", ["s", "p"], ["t"], name="pick")],
                       [seq("s", F), tensor("p", I64, [])], [tensor("t", F, None)])
    session = tessera.InferenceSession(model)
    items = [rand(2, k + 1, seed=k) for k in range(4)]
    if -4 <= position < 4:
        (t,) = session.run(None, {"s": items, "p": np.array(position, np.int64)})
        np.testing.assert_array_equal(t, items[position])
    else:
        with pytest.raises(tessera.InvalidArgument, match="pick"):
            session.run(None, {"s": items, "p": np.array(position, np.int64)})


def insert_erase_model(with_insert_position, with_erase_position):
    """u = SequenceInsert(s, t[, ip]); e = SequenceErase(s[, ep]); both returned, with SequenceLength(u)."""
    ins = ["s", "t"] + (["ip"] if with_insert_position else [])
    era = ["s"] + (["ep"] if with_erase_position else [])
    inputs = [seq("s", F), tensor("t", F, ["r", 2])]  # an open dim: compiled per shape of t
    inputs += [tensor("ip", I64, [])] if with_insert_position else []
    inputs += [tensor("ep", I64, [])] if with_erase_position else []
    return make_model([helper.make_node("SequenceInsert", ins, ["u"]), helper.make_node("SequenceErase", era, ["e"]),
                       helper.make_node("SequenceLength", ["u"], ["n"])],
                      inputs, [seq("u", F), seq("e", F), tensor("n", I64, [])])


@pytest.mark.parametrize("insert_at,erase_at", [(None, None), (0, 0), (2, 1), (3, 2), (-1, -1), (-3, -3), (1, -2)])
def test_sequence_insert_and_erase_match_python_lists(insert_at, erase_at):
    model = insert_erase_model(insert_at is not None, erase_at is not None)
    session = tessera.InferenceSession(model)
    items = [rand(k + 1, 2, seed=k) for k in range(3)]
    new = rand(5, 2, seed=9)
    feed = {"s": items, "t": new}
    if insert_at is not None:
        feed["ip"] = np.array(insert_at, np.int64)
    if erase_at is not None:
        feed["ep"] = np.array(erase_at, np.int64)
    u, e, n = session.run(None, feed)
    inserted = list(items)
    # ONNX: a negative position counts from the back, -1 inserting before the last tensor (like list.insert).
    inserted.insert(len(items) if insert_at is None else insert_at, new)
    erased = list(items)
    del erased[-1 if erase_at is None else erase_at]
    assert_arrays_equal(u, inserted)
    assert_arrays_equal(e, erased)
    assert int(n) == 4
    assert_arrays_equal(session.run(["e"], feed)[0], erased)  # output_names select sequences too


def test_sequence_insert_position_out_of_range_is_invalid_argument():
    session = tessera.InferenceSession(insert_erase_model(True, False))
    with pytest.raises(tessera.InvalidArgument):
        session.run(None, {"s": [rand(2)], "t": rand(2), "ip": np.array(5, np.int64)})


def test_sequence_output_is_copied_and_owned():
    """Sequence outputs may share tensors with the model's constants: the arrays handed out are the
    caller's, and writing into them changes nothing for the next run."""
    c0, c1 = rand(2, 3, seed=5), rand(4, seed=6)
    model = make_model([helper.make_node("SequenceConstruct", ["c0", "c1"], ["s"]),
                        helper.make_node("SequenceAt", ["s", "i"], ["t"])],
                       [tensor("i", I64, [])], [seq("s", F), tensor("t", F, None)],
                       [numpy_helper.from_array(c0, "c0"), numpy_helper.from_array(c1, "c1")])
    session = tessera.InferenceSession(model)
    for _ in range(2):
        s, t = session.run(None, {"i": np.array(1, np.int64)})
        assert_arrays_equal(s, [c0, c1])
        np.testing.assert_array_equal(t, c1)
        for a in s + [t]:
            a[...] = 42  # writeable, and ours
    assert not np.shares_memory(s[1], t)


def test_outputs_never_share_memory():
    """A sequence may hold one tensor twice, and a tensor output may be one of a sequence's: every array
    handed out has its own memory."""
    model = make_model([helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
                        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
                        helper.make_node("SequenceAt", ["s", "zero"], ["t"]),
                        helper.make_node("Optional", ["a"], ["o"])],
                       [tensor("a", F, [3])], [seq("s", F), tensor("t", F, [3]), opt_tensor("o", F, [3])])
    a = rand(3)
    s, t, o = tessera.InferenceSession(model).run(None, {"a": a})
    assert_arrays_equal(s, [a, a])
    arrays = s + [t, o]
    for i, x in enumerate(arrays):
        for y in arrays[i + 1:]:
            assert not np.shares_memory(x, y)
    s[0][...] = 1
    np.testing.assert_array_equal(s[1], a)


def test_empty_sequence_and_as_dlpack():
    model = make_model([helper.make_node("Identity", ["s"], ["o"]), helper.make_node("SequenceLength", ["s"], ["n"])],
                       [seq("s", F)], [seq("o", F), tensor("n", I64, [])])
    session = tessera.InferenceSession(model)
    o, n = session.run(None, {"s": []})
    assert o == [] and int(n) == 0
    items = [rand(2, 2, seed=1), rand(3, seed=2)]
    o, n = session.run(None, {"s": items}, as_dlpack=True)
    assert all(isinstance(t, tessera.Tensor) for t in o)
    assert_arrays_equal([np.from_dlpack(t) for t in o], items)
    assert isinstance(n, tessera.Tensor) and int(np.from_dlpack(n)) == 2


def test_sequence_of_int64_and_concat_from_sequence_of_an_input():
    model = make_model([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)], [seq("s", I64, ["n"])],
                       [tensor("y", I64, ["m"])])
    session = tessera.InferenceSession(model)
    items = [np.arange(k, dtype=np.int64) for k in (3, 1, 4)]
    (y,) = session.run(None, {"s": items})
    np.testing.assert_array_equal(y, np.concatenate(items))


# ------------------------------------------------------------------------------------ optionals --

def optional_tensor_model():
    """o: optional tensor input -> OptionalHasElement(o), and o itself."""
    return make_model([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                       helper.make_node("Identity", ["o"], ["same"])],
                      [opt_tensor("o", F, [2, 3])], [tensor("has", B, []), opt_tensor("same", F, [2, 3])])


def test_optional_tensor_input_none_and_present():
    session = tessera.InferenceSession(optional_tensor_model())
    has, same = session.run(None, {"o": None})
    assert has.dtype == np.bool_ and has.shape == () and not has
    assert same is None
    x = rand(2, 3)
    has, same = session.run(None, {"o": x})
    assert bool(has)
    assert isinstance(same, np.ndarray) and same.dtype == np.float32
    np.testing.assert_array_equal(same, x)
    assert not np.shares_memory(same, x)


def test_optional_tensor_with_an_open_dim_takes_any_size():
    """Optionals, like sequences, are not bound to a shape: the model compiles once, and each run's tensor
    is checked against the declared type."""
    model = make_model([helper.make_node("OptionalGetElement", ["o"], ["y"]),
                        helper.make_node("ReduceSum", ["y"], ["z"], keepdims=0)],
                       [opt_tensor("o", F, ["n", 2])], [tensor("z", F, None)])
    session = tessera.InferenceSession(model)
    assert session.get_inputs()[0].shape == ["n", 2]
    assert session.placement()  # compiled up front: no open dim of a tensor input
    for n in (1, 3, 0):
        x = rand(n, 2, seed=n)
        (z,) = session.run(None, {"o": x})
        np.testing.assert_allclose(z, x.sum(), rtol=1e-6)
    with pytest.raises(tessera.InvalidArgument, match="'o'"):
        session.run(None, {"o": rand(2, 3)})


def test_optional_get_element_and_empty_optional_error():
    model = make_model([helper.make_node("OptionalGetElement", ["o"], ["x"], name="get")],
                       [opt_tensor("o", F, [3])], [tensor("x", F, [3])])
    session = tessera.InferenceSession(model)
    x = np.array([1.0, -2.0, 3.5], np.float32)
    (y,) = session.run(None, {"o": x})
    np.testing.assert_array_equal(y, x)
    with pytest.raises(tessera.InvalidArgument, match="get"):
        session.run(None, {"o": None})


def test_optional_sequence_input_none_and_list():
    model = make_model([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                        helper.make_node("OptionalGetElement", ["o"], ["s"]),
                        helper.make_node("SequenceLength", ["s"], ["n"])],
                       [opt_seq("o", F)], [tensor("has", B, []), tensor("n", I64, [])])
    session = tessera.InferenceSession(model)
    has, n = session.run(None, {"o": [rand(2), rand(3), rand(1)]})
    assert bool(has) and int(n) == 3
    empty_model = make_model([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                              helper.make_node("Identity", ["o"], ["same"])],
                             [opt_seq("o", F)], [tensor("has", B, []), opt_seq("same", F)])
    session = tessera.InferenceSession(empty_model)
    has, same = session.run(None, {"o": None})
    assert not has and same is None
    items = [rand(2, seed=1), rand(3, seed=2)]
    has, same = session.run(None, {"o": items})
    assert bool(has)
    assert_arrays_equal(same, items)
    has, same = session.run(None, {"o": []})  # present, and empty
    assert bool(has) and same == []


def test_optional_output_made_by_the_model():
    model = make_model([helper.make_node("Optional", ["x"], ["o"]),
                        helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(F, None))],
                       [tensor("x", F, [2])], [opt_tensor("o", F, [2]), opt_tensor("e", F)])
    o, e = tessera.InferenceSession(model).run(None, {"x": np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(o, [1, 2])
    assert e is None


# -------------------------------------------------------------------------------------- strings --

def shortest_float32_text(value):
    """What C++'s std::to_chars writes for a float32 (what Tessera's Cast to string gives): the shortest
    digits that read back to the same float32 (numpy's, as repr(np.float32) uses), in fixed or scientific
    notation, whichever is shorter (fixed on a tie); a fixed integer is written exactly; NaN, INF, -INF."""
    value = np.float32(value)
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "INF" if value > 0 else "-INF"
    scientific = np.format_float_scientific(value, unique=True, trim="-", exp_digits=2)
    mantissa, exponent = scientific.split("e")
    exponent = int(exponent)
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    if exponent >= len(digits) - 1:
        fixed = sign + str(int(abs(float(value))))
    elif exponent >= 0:
        fixed = sign + digits[:exponent + 1] + "." + digits[exponent + 1:]
    else:
        fixed = sign + "0." + "0" * (-exponent - 1) + digits
    return fixed if len(fixed) <= len(scientific) else scientific


def cast_model(to, n, elem_from):
    return make_model([helper.make_node("Cast", ["x"], ["y"], to=to)], [tensor("x", elem_from, [n])],
                      [tensor("y", to, [n])])


def test_shortest_float32_text_reference():
    """The reference itself, against values worked out by hand."""
    cases = [(0.0, "0"), (-0.0, "-0"), (1.0, "1"), (-2.5, "-2.5"), (0.1, "0.1"), (100.0, "100"), (1e6, "1e+06"),
             (123456789.0, "123456792"), (1e-4, "1e-04"), (0.001, "0.001"), (3.4028235e38, "3.4028235e+38"),
             (1e-45, "1e-45"), (1.0 / 3, "0.33333334"), (np.nan, "NaN"), (-np.inf, "-INF")]
    for value, text in cases:
        assert shortest_float32_text(value) == text, (value, shortest_float32_text(value), text)


def test_cast_float_to_string_is_the_shortest_round_trip_text():
    rng = np.random.default_rng(7)
    values = np.concatenate([
        np.array([0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 2.5, 100.0, 65504.0, 1e6, 1e7, 1e15, 1e16, 1e-4, 1e-5, 0.001,
                  123456789.0, 16777216.0, 3.4028235e38, -3.4028235e38, 1.17549435e-38, 1e-45, np.pi,
                  np.nan, np.inf, -np.inf], np.float32),
        rng.standard_normal(200).astype(np.float32) * np.float32(10.0) ** rng.integers(-12, 12, 200),
        rng.integers(-100000, 100000, 50).astype(np.float32),
    ]).astype(np.float32)
    (text,) = tessera.InferenceSession(cast_model(S, len(values), F)).run(None, {"x": values})
    assert text.dtype.kind == "U" and text.shape == values.shape
    for value, got in zip(values, text):
        assert got == shortest_float32_text(value), (value, got)
        read_back = np.float32(float(got))
        assert np.isnan(value) if np.isnan(read_back) else read_back.tobytes() == value.tobytes(), (value, got)


def test_cast_float_to_string_digits_match_python_repr():
    """Where numpy's repr writes fixed notation with a fraction, Tessera writes the same text."""
    values = np.array([0.1, 1 / 3, -2.75, 3.1415927, 12.5, 0.3, 1234.5677, 0.07], np.float32)
    (text,) = tessera.InferenceSession(cast_model(S, len(values), F)).run(None, {"x": values})
    assert list(text) == [repr(np.float32(v)) for v in values]


def test_cast_string_to_float():
    texts = np.array(["1.5", "-3", "1e-3", "0.1", "+2.5", "3.4028235e38", "1e-45", "NaN", "INF", "-INF", "inf",
                      "7", "-0", "123456789"])
    (values,) = tessera.InferenceSession(cast_model(F, len(texts), S)).run(None, {"x": texts})
    assert values.dtype == np.float32
    want = np.array([np.float32(float(t)) for t in texts], np.float32)
    np.testing.assert_array_equal(values, want)  # NaN equals NaN here
    assert np.signbit(values[list(texts).index("-0")])


def test_cast_of_a_string_that_is_not_a_number_names_the_node():
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=F, name="parse")], [tensor("x", S, [2])],
                       [tensor("y", F, [2])])
    with pytest.raises(tessera.InvalidArgument, match="parse.*abc"):
        tessera.InferenceSession(model).run(None, {"x": np.array(["1", "abc"])})


def test_cast_round_trip_float_string_float_is_exact():
    model = make_model([helper.make_node("Cast", ["x"], ["s"], to=S), helper.make_node("Cast", ["s"], ["y"], to=F)],
                       [tensor("x", F, [64])], [tensor("s", S, [64]), tensor("y", F, [64])])
    x = (np.random.default_rng(3).standard_normal(64) * 1e3).astype(np.float32)
    s, y = tessera.InferenceSession(model).run(None, {"x": x})
    assert y.tobytes() == x.tobytes()
    assert list(s) == [shortest_float32_text(v) for v in x]


def string_normalizer_reference(words, case_change_action="NONE", is_case_sensitive=0, stopwords=()):
    """ONNX StringNormalizer on a list of words: stopwords removed (compared lower-cased when not
    case-sensitive), then the case changed; everything removed gives [""]."""
    if is_case_sensitive:
        kept = [w for w in words if w not in set(stopwords)]
    else:
        lowered = {s.lower() for s in stopwords}
        kept = [w for w in words if w.lower() not in lowered]
    if case_change_action == "LOWER":
        kept = [w.lower() for w in kept]
    elif case_change_action == "UPPER":
        kept = [w.upper() for w in kept]
    return kept or [""]


WORDS = ["The", "quick", "Brown", "fox", "THE", "lazy", "dog", "the", "MiXeD42"]


@pytest.mark.parametrize("attrs", [
    dict(case_change_action="LOWER"),
    dict(case_change_action="UPPER"),
    dict(case_change_action="NONE", stopwords=["the", "fox"], is_case_sensitive=1),
    dict(case_change_action="LOWER", stopwords=["the", "FOX"], is_case_sensitive=0),
    dict(case_change_action="UPPER", stopwords=["THE", "dog"], is_case_sensitive=1),
    dict(case_change_action="NONE", stopwords=[w.upper() for w in WORDS], is_case_sensitive=0),  # all removed
    dict(case_change_action="LOWER", stopwords=list(WORDS), is_case_sensitive=1),  # all removed
])
@pytest.mark.parametrize("rank", [1, 2])
def test_string_normalizer_matches_python(attrs, rank):
    shape = [len(WORDS)] if rank == 1 else [1, len(WORDS)]
    model = make_model([helper.make_node("StringNormalizer", ["x"], ["y"], **attrs)],
                       [tensor("x", S, shape)], [tensor("y", S, None)])
    x = np.array(WORDS).reshape(shape)
    (y,) = tessera.InferenceSession(model).run(None, {"x": x})
    want = string_normalizer_reference(WORDS, attrs.get("case_change_action", "NONE"),
                                       attrs.get("is_case_sensitive", 0), attrs.get("stopwords", ()))
    want = np.array(want).reshape([len(want)] if rank == 1 else [1, len(want)])
    assert y.dtype.kind == "U" and y.shape == want.shape, (y, want)
    assert y.tolist() == want.tolist()


UNICODE = [["é", "日本", ""], ["a b\tc", "🙂 ok", "a\x00b"]]


def identity_strings_model(shape):
    return make_model([helper.make_node("Identity", ["x"], ["y"])], [tensor("x", S, shape)], [tensor("y", S, shape)])


def test_unicode_strings_pass_through_identity_unchanged():
    session = tessera.InferenceSession(identity_strings_model([2, 3]))
    x = np.array(UNICODE)
    (y,) = session.run(None, {"x": x})
    assert y.dtype.kind == "U" and y.shape == (2, 3)
    assert y.tolist() == [["\u00e9", "\u65e5\u672c", ""], ["a b\tc", "\U0001f642 ok", "a\x00b"]]  # NULs inside survive
    assert [w.encode() for w in y.ravel()] == [b"\xc3\xa9", b"\xe6\x97\xa5\xe6\x9c\xac", b"", b"a b\tc",
                                               b"\xf0\x9f\x99\x82 ok", b"a\x00b"]
    (y,) = session.run(None, {"x": np.array(UNICODE, dtype=object)})  # an object array of str
    assert y.tolist() == UNICODE
    (y,) = session.run(None, {"x": np.array(UNICODE)[:, ::-1].T.T[:, ::-1]})  # a strided view
    assert y.tolist() == UNICODE
    (y,) = session.run(None, {"x": UNICODE})  # a nested list of str
    assert y.tolist() == UNICODE


def test_string_scalars_and_empty_string_tensors():
    (y,) = tessera.InferenceSession(identity_strings_model([])).run(None, {"x": np.array("日本語")})
    assert y.shape == () and y.dtype.kind == "U" and str(y) == "日本語"
    (y,) = tessera.InferenceSession(identity_strings_model([0, 2])).run(None, {"x": np.empty((0, 2), "U1")})
    assert y.shape == (0, 2) and y.dtype.kind == "U"


def test_trailing_nuls_are_dropped_by_numpy():
    """numpy's str arrays cannot hold trailing NUL characters: they are gone before Tessera sees them."""
    (y,) = tessera.InferenceSession(identity_strings_model([2])).run(None, {"x": np.array(["ab\x00", "\x00"])})
    assert y.tolist() == ["ab", ""]


def test_sequences_and_optionals_of_string_tensors():
    """(Sequence ops take numeric tensors only; Identity passes sequences and optionals of strings.)"""
    model = make_model([helper.make_node("Identity", ["s"], ["u"]), helper.make_node("Identity", ["o"], ["p"])],
                       [seq("s", S), opt_tensor("o", S, [2])], [seq("u", S), opt_tensor("p", S, [2])])
    session = tessera.InferenceSession(model)
    assert [a.type for a in session.get_inputs()] == ["seq(tensor(string))", "optional(tensor(string))"]
    u, p = session.run(None, {"s": [np.array(["x", "日本"]), ["é"], np.array("scalar")], "o": np.array(["a", "bc"])})
    assert [t.tolist() for t in u] == [["x", "日本"], ["é"], "scalar"]
    assert all(isinstance(t, np.ndarray) and t.dtype.kind == "U" for t in u)
    assert p.tolist() == ["a", "bc"]
    u, p = session.run(None, {"s": [], "o": None})
    assert u == [] and p is None


def test_string_output_with_as_dlpack_stays_a_numpy_array():
    (y,) = tessera.InferenceSession(identity_strings_model([2])).run(None, {"x": np.array(["p", "q"])}, as_dlpack=True)
    assert isinstance(y, np.ndarray) and y.tolist() == ["p", "q"]


# ---------------------------------------------------------------------------------- description --

def test_inputs_and_outputs_describe_kind_and_dtype():
    model = make_model([helper.make_node("SequenceLength", ["s"], ["n"]),
                        helper.make_node("OptionalHasElement", ["o"], ["has"]),
                        helper.make_node("Identity", ["w"], ["w2"]),
                        helper.make_node("Identity", ["q"], ["q2"])],
                       [seq("s", F, ["k"]), opt_tensor("o", I64, [3]), tensor("w", S, [2]), opt_seq("q", F)],
                       [tensor("n", I64, []), tensor("has", B, []), tensor("w2", S, [2]), opt_seq("q2", F)])
    session = tessera.InferenceSession(model)
    inputs = {a.name: a for a in session.get_inputs()}
    assert [(a.kind, a.dtype, a.type) for a in inputs.values()] == [
        ("sequence", "float32", "seq(tensor(float))"), ("optional_tensor", "int64", "optional(tensor(int64))"),
        ("tensor", "str", "tensor(string)"), ("optional_sequence", "float32", "optional(seq(tensor(float)))")]
    assert inputs["o"].shape == [3] and inputs["w"].shape == [2]
    outputs = {a.name: a for a in session.get_outputs()}
    assert (outputs["w2"].kind, outputs["w2"].dtype) == ("tensor", "str")
    assert outputs["q2"].type == "optional(seq(tensor(float)))"
    assert outputs["n"].kind == "tensor" and outputs["n"].type == "tensor(int64)"
    assert "seq(tensor(float))" in repr(inputs["s"])
    # No open dim of a tensor input: compiled once, up front (placement needs no run).
    assert all(p["backend"] for p in session.placement())
    n, has, w2, q2 = session.run(None, {"s": [rand(1), rand(2)], "o": None, "w": np.array(["a", "b"]), "q": None})
    assert int(n) == 2 and not has and w2.tolist() == ["a", "b"] and q2 is None


def test_numeric_models_describe_kind_tensor():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", F, [2])], [tensor("y", F, [2])])
    session = tessera.InferenceSession(model)
    assert session.get_inputs()[0].kind == "tensor" and session.get_inputs()[0].type == "tensor(float)"


def test_open_dims_with_a_sequence_input_compile_per_tensor_shape_only():
    """x has an open dim, so the session compiles per x shape; the sequence input is not bound to a shape
    (its tensors may differ from run to run), and sequences of any length and shapes share a variant."""
    model = make_model([helper.make_node("SequenceInsert", ["s", "x"], ["u"]),
                        helper.make_node("ConcatFromSequence", ["u"], ["y"], axis=0)],
                       [seq("s", F, ["m", 2]), tensor("x", F, ["batch", 2])], [tensor("y", F, [None, 2])])
    session = tessera.InferenceSession(model, max_variants=2)
    assert session.get_inputs()[0].shape == ["m", 2]
    for batch, lengths in [(1, [3]), (4, [2, 5]), (1, []), (4, [1, 1, 1]), (2, [6])]:
        x = rand(batch, 2, seed=batch)
        items = [rand(k, 2, seed=k) for k in lengths]
        (y,) = session.run(None, {"s": items, "x": x})
        np.testing.assert_array_equal(y, np.concatenate(items + [x], axis=0))
    assert session.placement()  # the latest variant


def test_compiled_artifacts_keep_kinds_and_run(tmp_path):
    model = make_model([helper.make_node("SequenceLength", ["s"], ["n"]), helper.make_node("Identity", ["s"], ["o"]),
                        helper.make_node("Cast", ["x"], ["y"], to=S)],
                       [seq("s", F), tensor("x", F, [2])], [tensor("n", I64, []), seq("o", F), tensor("y", S, [2])])
    session = tessera.InferenceSession(model)
    path = tmp_path / "values.tsr"
    session.save(path)
    items = [rand(2, seed=1), rand(3, 1, seed=2)]
    x = np.array([1.5, -0.25], np.float32)
    for loaded in (tessera.InferenceSession(path), tessera.InferenceSession(session.to_bytes())):
        assert [a.type for a in loaded.get_inputs()] == ["seq(tensor(float))", "tensor(float)"]
        assert [a.type for a in loaded.get_outputs()] == ["tensor(int64)", "seq(tensor(float))", "tensor(string)"]
        n, o, y = loaded.run(None, {"s": items, "x": x})
        assert int(n) == 2 and y.tolist() == ["1.5", "-0.25"]
        assert_arrays_equal(o, items)


def test_torch_tensors_as_sequence_items():
    import torch  # Debian's python3-torch is required here: a missing torch fails, never skips
    session = tessera.InferenceSession(sequence_input_model())
    items = [torch.ones(2, requires_grad=True), torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, ::2]]
    n, t = session.run(None, {"s": items})
    assert int(n) == 2
    np.testing.assert_array_equal(t, [[0, 2], [3, 5]])


def test_runs_from_several_threads():
    session = tessera.InferenceSession(sequence_input_model())
    errors = []

    def worker(k):
        try:
            for i in range(20):
                items = [rand(k + 1, i + 1, seed=k * 100 + i) for _ in range(k + 1)]
                n, t = session.run(None, {"s": items})
                assert int(n) == k + 1
                np.testing.assert_array_equal(t, items[-1])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# --------------------------------------------------------------------------------------- errors --

def test_a_list_for_a_tensor_input_is_invalid_argument():
    model = make_model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0)], [tensor("x", F, [2, 2])],
                       [seq("s", F)])
    session = tessera.InferenceSession(model)
    with pytest.raises(tessera.InvalidArgument, match=r"input 'x' is a tensor.*list of arrays"):
        session.run(None, {"x": [rand(2), rand(2)]})
    with pytest.raises(tessera.InvalidArgument, match=r"input 'x' is None.*tensor"):
        session.run(None, {"x": None})


def test_an_array_or_none_for_a_sequence_input_is_invalid_argument():
    session = tessera.InferenceSession(sequence_input_model())
    with pytest.raises(tessera.InvalidArgument, match=r"input 's' is a sequence, but a numpy array was given"):
        session.run(None, {"s": rand(2, 2)})
    with pytest.raises(tessera.InvalidArgument, match=r"input 's' is a sequence, but None was given"):
        session.run(None, {"s": None})
    with pytest.raises(tessera.InvalidArgument, match=r"input 's' is a sequence, but a float was given"):
        session.run(None, {"s": 1.5})
    with pytest.raises(tessera.InvalidArgument, match=r"input 's' item 1 is None"):
        session.run(None, {"s": [rand(2), None]})


def test_wrong_items_in_a_sequence_are_invalid_argument():
    session = tessera.InferenceSession(sequence_input_model())
    with pytest.raises(tessera.InvalidArgument, match="'s'"):
        session.run(None, {"s": [np.arange(3)]})  # int64 for a sequence of float
    with pytest.raises(tessera.InvalidArgument, match="'s'"):
        session.run(None, {"s": [rand(2), np.arange(3, dtype=np.float64)]})  # mixed dtypes
    with pytest.raises(tessera.InvalidArgument, match="input 's'.*string"):
        session.run(None, {"s": [np.array(["a"])]})  # strings for a sequence of float
    with pytest.raises(tessera.InvalidArgument, match="input 's' item 0.*cannot convert"):
        session.run(None, {"s": [[[1.0], [2.0, 3.0]]]})  # a ragged item


def test_wrong_kinds_for_optional_inputs_are_invalid_argument():
    session = tessera.InferenceSession(optional_tensor_model())
    with pytest.raises(tessera.InvalidArgument, match=r"input 'o' is an optional tensor.*list of arrays"):
        session.run(None, {"o": [rand(2, 3)]})
    with pytest.raises(tessera.InvalidArgument, match="'o'"):
        session.run(None, {"o": rand(3, 2)})  # the wrong shape
    model = make_model([helper.make_node("OptionalHasElement", ["o"], ["has"])], [opt_seq("o", F)],
                       [tensor("has", B, [])])
    session = tessera.InferenceSession(model)
    with pytest.raises(tessera.InvalidArgument, match=r"input 'o' is an optional sequence, but a numpy array"):
        session.run(None, {"o": rand(2)})


def test_wrong_string_inputs_are_invalid_argument():
    session = tessera.InferenceSession(identity_strings_model([2]))
    with pytest.raises(tessera.InvalidArgument, match=r"input 'x': element 1 of the object array is an int"):
        session.run(None, {"x": np.array(["a", 3], dtype=object)})
    with pytest.raises(tessera.InvalidArgument, match="'x'"):
        session.run(None, {"x": np.array([1.0, 2.0], np.float32)})  # numbers for strings
    with pytest.raises(tessera.InvalidArgument, match="'x'.*UTF-8"):
        session.run(None, {"x": np.array(["a", "\ud800"], dtype=object)})  # a lone surrogate
    with pytest.raises(tessera.InvalidArgument, match="'x'"):
        session.run(None, {"x": np.array(["a", "b", "c"])})  # the wrong shape
    session = tessera.InferenceSession(cast_model(S, 2, F))
    with pytest.raises(tessera.InvalidArgument, match="'x'"):
        session.run(None, {"x": np.array(["1.5", "2"])})  # strings for numbers


def test_profile_and_check_refuse_such_models():
    session = tessera.InferenceSession(sequence_input_model())
    with pytest.raises(tessera.Unsupported, match="input 's' is a sequence"):
        session.profile({"s": [rand(2)]}, runs=1)
    with pytest.raises(tessera.Unsupported, match="input 's' is a sequence"):
        session.check({"s": [rand(2)]})


def test_loop_appends_without_losing_values_read_after_the_insert():
    # Loop body: s2 = SequenceInsert(s, row i); before = SequenceLength(s) read after the insert, so the
    # insert is not s's last reader and must not take its tensors (the interpreter moves a box only at its
    # last reader). Scan output `before` is 0, 1, 2, ...; the final list is the rows in order.
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("SequenceInsert", ["s", "row"], ["s2"]),
         helper.make_node("SequenceLength", ["s"], ["before"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         seq("s", TensorProto.FLOAT)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), seq("s2", TensorProto.FLOAT),
         helper.make_tensor_value_info("before", TensorProto.INT64, [])])
    model = make_model(
        [helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
         helper.make_node("Loop", ["n", "", "empty"], ["rows", "lengths"], body=body),
         helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=0, new_axis=1)],
        [tensor("x", TensorProto.FLOAT, [None, 3]), tensor("n", TensorProto.INT64, [])],
        [seq("rows", TensorProto.FLOAT), tensor("lengths", TensorProto.INT64, [None]), tensor("stacked", TensorProto.FLOAT, None)])
    x = rand(7, 3)
    rows, lengths, stacked = tessera.InferenceSession(model).run(None, {"x": x, "n": np.array(7, np.int64)})
    assert list(lengths) == list(range(7))
    assert_arrays_equal(rows, [x[k] for k in range(7)])
    np.testing.assert_array_equal(stacked, x)
