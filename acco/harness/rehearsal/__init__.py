"""The dress rehearsal: every paper experiment's paper-scale configuration with only its sizes shrunk.

* ``overlay``: what an experiment's ``rehearsal:`` block may change (sizes, paths, where it runs)
  and how it is applied on top of the paper block;
* ``corpora``, ``tokenizer_folders``, ``model_folder``, ``make``: local stand-ins for the paper's
  downloads (OpenWebText, TinyStories, Alpaca, LAMBADA, the GPT-Neo and Llama-2 tokenizers, a
  pretrained GPT-Neo), each in the layout and schema of the real one, written by
  ``experiments/make_rehearsal_data.py`` and read through the same loaders as a downloaded copy.
"""
