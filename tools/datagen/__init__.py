"""datagen - training data for any tool set, from nothing but its JSON Schemas.

Used by tools/generate_data.py (and so by `needle generate-data`). Modules:
  schema     read a tools file, classify every parameter into a value kind
  values     open value pools (Faker, num2words) and their spellings
  phrasing   requests built compositionally from tool and parameter names
  offtopic   requests no declared tool fits (other domains, foreign tools)
  build      rows per behaviour category, splits, files
  paraphrase optional rewriting through an OpenAI-compatible chat endpoint
Faker and num2words are development dependencies of this generator only.
"""
