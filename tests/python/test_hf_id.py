"""LLM("ORG/NAME") as vLLM takes it, offline: the tiny fixture with a byte-level tokenizer laid out
as huggingface_hub writes its cache (blobs named by their etag, snapshots of relative links,
refs/<revision> files) is found through download_dir=, $HF_HUB_CACHE and revision=, and generates
what the directory generates; an id not cached and a directory that does not exist are ValueErrors
that say so."""
import hashlib
import os
import shutil
import tempfile
import unittest

from helpers import CPU, byte_tokenizer_model
from nanovllm import LLM, SamplingParams

ID = "tiny-org/Tiny-Qwen3"
MAIN, TAG = "0123456789abcdef0123456789abcdef01234567", "fedcba9876543210fedcba9876543210fedcba98"


def hf_snapshot(root, repo_id, commit, src):
    """Puts the files of `src` into the cache `root` as snapshot `commit` of `repo_id`."""
    repo = os.path.join(root, "models--" + repo_id.replace("/", "--"))
    snap = os.path.join(repo, "snapshots", commit)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(snap, exist_ok=True)
    for f in sorted(os.listdir(src)):
        with open(os.path.join(src, f), "rb") as fh:
            data = fh.read()
        if f.endswith(".safetensors"):  # an LFS file: its sha256; the others: their git blob sha1
            digest = hashlib.sha256(data).hexdigest()
        else:
            digest = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        blob = os.path.join(repo, "blobs", digest)
        if not os.path.exists(blob):
            with open(blob, "wb") as fh:
                fh.write(data)
        os.symlink(os.path.relpath(blob, snap), os.path.join(snap, f))


def hf_ref(root, repo_id, revision, commit):
    path = os.path.join(root, "models--" + repo_id.replace("/", "--"), "refs", revision)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(commit)


class HfIdTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.model = byte_tokenizer_model()
        cls.tmp = tempfile.mkdtemp(prefix="nanovllm-hf-")
        cls.hub = os.path.join(cls.tmp, "hub")
        hf_snapshot(cls.hub, ID, MAIN, cls.model)
        hf_snapshot(cls.hub, ID, TAG, cls.model)
        hf_ref(cls.hub, ID, "main", MAIN)
        hf_ref(cls.hub, ID, "v1", TAG)
        cls.sp = SamplingParams(temperature=0, max_tokens=6, ignore_eos=True)
        out = LLM(cls.model, **CPU).generate(["Hello"], cls.sp, use_tqdm=False)[0]
        cls.want = (out["token_ids"], out["text"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.model)
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.saved = {k: os.environ.pop(k, None) for k in ("HF_HUB_CACHE", "HF_HOME", "HUGGINGFACE_HUB_CACHE")}
        os.environ["HF_HUB_CACHE"] = os.path.join(self.tmp, "empty")  # never the user's own cache

    def tearDown(self):
        for k, v in self.saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v

    def generated(self, *args, **kwargs):
        out = LLM(*args, **kwargs, **CPU).generate(["Hello"], self.sp, use_tqdm=False)[0]
        return (out["token_ids"], out["text"])

    def test_download_dir(self):
        self.assertEqual(self.generated(ID, download_dir=self.hub), self.want)

    def test_hf_hub_cache_and_revisions(self):
        os.environ["HF_HUB_CACHE"] = self.hub
        self.assertEqual(self.generated(ID), self.want)
        self.assertEqual(self.generated(ID, revision="v1"), self.want)
        self.assertEqual(self.generated(ID, revision=TAG, tokenizer_revision=MAIN), self.want)

    def test_hf_home(self):
        del os.environ["HF_HUB_CACHE"]
        os.environ["HF_HOME"] = self.tmp  # <HF_HOME>/hub
        self.assertEqual(self.generated(ID), self.want)

    def test_an_id_not_cached(self):
        with self.assertRaises(ValueError) as e:
            LLM("tiny-org/Other", **CPU)
        msg = str(e.exception)
        for part in ("model 'tiny-org/Other': no such directory", "(revision main) is not in the local Hugging Face cache",
                     os.path.join(self.tmp, "empty", "models--tiny-org--Other"), "huggingface-cli download tiny-org/Other",
                     "hf download tiny-org/Other", "pass a local directory"):
            self.assertIn(part, msg)
        with self.assertRaisesRegex(ValueError, r"\(revision v2\) is in the local Hugging Face cache .* but not at "
                                                r"revision v2.*--revision v2"):
            LLM(ID, download_dir=self.hub, revision="v2", **CPU)

    def test_a_directory_that_does_not_exist(self):
        missing = os.path.join(self.tmp, "no-such-model")
        with self.assertRaisesRegex(ValueError, f"^model directory '{missing}' does not exist$"):
            LLM(missing, **CPU)
        with self.assertRaisesRegex(ValueError, "^model directory './no/such/model' does not exist$"):
            LLM("./no/such/model", **CPU)


if __name__ == "__main__":
    unittest.main()
