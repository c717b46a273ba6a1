"""The kernel interface (``dispatch.Kernel``) every path implements."""


def test_every_kernel_has_the_whole_interface_and_falls_back_to_a_path_that_computes_its_layers():
    from synthesizer.attention import registry
    from synthesizer.attention.dispatch import KERNELS, Kernel

    specs = [registry.spec(c) for c in registry.names()]
    for name, kernel in KERNELS.items():
        assert isinstance(kernel, Kernel), name
        assert kernel.NAME == name and kernel.NEEDS in ("logits", "features", "bias") and kernel.APPLIES_TO
        if kernel.FALLBACK is not None:  # whatever it computes, its fallback computes too
            fallback = KERNELS[kernel.FALLBACK]
            for a in specs:
                for b in specs:
                    layer = [a] if a is b else [a, b]
                    assert not kernel.applies(layer) or fallback.applies(layer), (name, layer)


def test_an_impl_that_does_not_apply_says_what_it_computes():
    import pytest

    from synthesizer.attention import SynthesizerAttention

    with pytest.raises(ValueError, match=r"impl='fused' does not apply to kind 'random'.*'fused' computes layers of "
                                         r"dot products of features only"):
        SynthesizerAttention(16, 2, 8, "random", impl="fused")
