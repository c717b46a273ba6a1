"""The one interface of a logits component, and the forms a component can take.

Every component is an ``nn.Module`` built as ``factory(d_model, n_heads, max_len, **options)`` with

* ``logits(x, start, n_keys) -> (B or 1, H, t, n_keys)``: its logits for the rows
  ``start..start+t-1`` (``t = x.shape[1]``, x holding those positions) against keys ``0..n_keys-1``.
  This is the reference form, what every fast path is tested against. Row ``i`` may use ``x_i``
  and position ``i`` only, so decoding with a values-only cache stays exact.

and a *form*, declared on the factory (class attribute ``form``, default ``LOGITS``), that says what
else it offers to the fast paths:

* ``FEATURES``: a dot product of features, ``features(x) -> (q', k')``, both (B, H, n, d_c), with
  ``q' k'^T`` equal to its logits (vanilla, dense, factorized_random). One that also says
  ``folds_weight = True`` takes a mixture weight as ``features(x, weight=w)`` (and ``features_at``) and
  returns ``w q'``, made without a pass over q' where it can (vanilla puts w into its query projection when
  that is smaller than q).
* ``BIAS``: an input-independent additive term, ``bias(n) -> (H, n, n)`` (random, fixed_random).
* ``LOGITS``: general logits, reference path only (factorized_dense, and any component that declares
  nothing else).

A component whose logits do not depend on the input at all also says ``input_independent = True``
and offers ``bias(n)`` whatever its form (factorized_random is a FEATURES component of that kind),
so a layer made only of such components computes its probabilities once for the whole batch.

Keys of earlier positions: the one component that needs more than ``x_i`` (``vanilla``: its logits
pair the queries of the new rows with the keys of every position) says ``cached_keys`` in the
registry and offers ``keys(x) -> (B, H, t, d_h)``. The layer hands all ``n_keys`` of them over as
``logits(x, start, n_keys, keys=...)``: computed from x in a full pass, and when decoding the ones
the cache stored (``AttentionCache.keys``) with those of the new positions appended. Called
without ``keys`` on a full pass (``start == 0``), vanilla computes them from x itself.
"""

from __future__ import annotations

FEATURES = "features"
BIAS = "bias"
LOGITS = "logits"
FORMS = (FEATURES, BIAS, LOGITS)
