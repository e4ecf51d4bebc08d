"""TensorFlow/Keras versions of mac-ml-speed-test's workloads: ResNet50 from keras.applications
(random weights) and a DistilBERT-shaped encoder written in Keras (transformers 5 dropped its
TensorFlow models). The encoder has DistilBERT's layers and parameter count (a test compares it
with transformers' torch DistilBERT of the same configuration)."""
from __future__ import annotations


def resnet50(size: int, classes: int):
    import keras

    return keras.applications.ResNet50(weights=None, input_shape=(size, size, 3), classes=classes,
                                       classifier_activation=None)


def distilbert(vocab: int, dim: int, layers: int, heads: int, ffn: int, max_len: int, classes: int,
               train_top_block_only: bool = True):
    """DistilBERT for sequence classification: word + position embeddings, LayerNorm, `layers`
    post-LN transformer blocks, the first token through pre_classifier (ReLU) and classifier.
    With train_top_block_only, as the seed: only the last block and the two head layers train."""
    import keras
    from keras import layers as L
    from keras import ops

    # DistilBERT's initialisation (initializer_range 0.02): with Keras's default Glorot weights a
    # fresh classifier starts far from uniform predictions (first loss ~1.7 instead of ln 2).
    init = keras.initializers.TruncatedNormal(stddev=0.02)

    class Embed(L.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.word = L.Embedding(vocab, dim, embeddings_initializer=init, name="word_embeddings")
            self.pos = L.Embedding(max_len, dim, embeddings_initializer=init, name="position_embeddings")
            self.norm = L.LayerNormalization(epsilon=1e-12, name="LayerNorm")

        def call(self, ids):
            return self.norm(self.word(ids) + self.pos(ops.arange(ops.shape(ids)[1])))

    class Block(L.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.attn = L.MultiHeadAttention(heads, dim // heads, kernel_initializer=init, name="attention")
            self.sa_norm = L.LayerNormalization(epsilon=1e-12, name="sa_layer_norm")
            self.lin1 = L.Dense(ffn, activation="gelu", kernel_initializer=init, name="lin1")
            self.lin2 = L.Dense(dim, kernel_initializer=init, name="lin2")
            self.out_norm = L.LayerNormalization(epsilon=1e-12, name="output_layer_norm")

        def call(self, x, mask):
            x = self.sa_norm(x + self.attn(x, x, attention_mask=mask))
            return self.out_norm(x + self.lin2(self.lin1(x)))

    ids = keras.Input((None,), dtype="int32", name="input_ids")
    am = keras.Input((None,), dtype="int32", name="attention_mask")
    mask = ops.cast(am[:, None, :], "bool")
    x = Embed(name="embeddings")(ids)
    blocks = [Block(name=f"layer_{i}") for i in range(layers)]
    for b in blocks:
        x = b(x, mask)
    pre = L.Dense(dim, activation="relu", kernel_initializer=init, name="pre_classifier")
    cls = L.Dense(classes, kernel_initializer=init, name="classifier")
    model = keras.Model([ids, am], cls(pre(x[:, 0])), name="distilbert")
    if train_top_block_only:
        for layer in model.layers:
            layer.trainable = layer.name in (blocks[-1].name, "pre_classifier", "classifier")
    return model
