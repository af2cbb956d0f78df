// Next-token windows of a text (data/Text.h): views of the one ids array, not copies of every
// window (issue 34: a 200 MB --text held its ids once for each window and each label run),
// whose batches, slices and streams equal those of the dense windows built before; and a
// text file read straight into its ids.
#include "TestUtil.h"

#include "data/Text.h"

#include <malloc.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace smelt::test {
namespace {

/// The windows as they were built before they became views: every example and label run
/// copied into dense [N, context] tensors.
data::Dataset denseWindows(const std::vector<int32_t> &ids, int64_t context, int64_t stride) {
  int64_t count = (int64_t(ids.size()) - context - 1) / stride + 1;
  rt::HostTensor examples = rt::HostTensor::zeros({rt::DType::i32, {count, context}});
  rt::HostTensor labels = rt::HostTensor::zeros({rt::DType::i32, {count, context}});
  for (int64_t i = 0; i < count; ++i) {
    const int32_t *start = ids.data() + i * stride;
    std::memcpy(examples.data<int32_t>() + i * context, start, size_t(context) * 4);
    std::memcpy(labels.data<int32_t>() + i * context, start + 1, size_t(context) * 4);
  }
  return data::Dataset(std::move(examples), std::move(labels));
}

std::vector<int32_t> randomIds(size_t count, int32_t vocab) {
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<int32_t> ids(count);
  for (int32_t &x : ids)
    x = id(rng());
  return ids;
}

void expectSameTensor(const rt::HostTensor &got, const rt::HostTensor &want) {
  ASSERT_EQ(got.type(), want.type());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.byteSize()), 0);
}

/// Every batch of an epoch (shuffled, batch size 7 so the last one is short) alike.
void expectSameBatches(const data::Dataset &got, const data::Dataset &want, int64_t epoch) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<int64_t> order = want.epochOrder(5, epoch, /*shuffle=*/true);
  ASSERT_EQ(got.epochOrder(5, epoch, true), order);
  ASSERT_EQ(got.batchCount(7, false), want.batchCount(7, false));
  for (int64_t b = 0; b < want.batchCount(7, false); ++b) {
    SCOPED_TRACE(b);
    data::Batch g = got.batch(order, 7, b), w = want.batch(order, 7, b);
    expectSameTensor(g.examples, w.examples);
    expectSameTensor(g.labels, w.labels);
  }
}

TEST(TextWindows, BatchesEqualTheDenseWindows) {
  SCOPED_TRACE("seed " + std::to_string(rngSeed()));
  std::vector<int32_t> ids = randomIds(1000, 90);
  // Strides below, at and above the context, and one that leaves a tail no window covers.
  for (auto [context, stride] : {std::pair<int64_t, int64_t>{8, 1}, {8, 3}, {5, 5}, {4, 7}}) {
    SCOPED_TRACE("context " + std::to_string(context) + ", stride " + std::to_string(stride));
    data::Dataset dense = denseWindows(ids, context, stride);
    rt::Expected<data::Dataset> views = data::nextTokenWindows(ids, context, stride);
    ASSERT_TRUE(views.ok()) << views.message();
    expectSameBatches(*views, dense, 0);
    expectSameBatches(*views, dense, 1);
    // Slices (a --limit, a validation split), an empty one at the very end included.
    for (auto [begin, end] :
         {std::pair<int64_t, int64_t>{0, 9}, {3, dense.size() - 2}, {dense.size(), dense.size()}}) {
      rt::Expected<data::Dataset> g = views->slice(begin, end), w = dense.slice(begin, end);
      ASSERT_TRUE(g.ok() && w.ok()) << g.message() << w.message();
      expectSameBatches(*g, *w, 2);
    }
    EXPECT_FALSE(views->slice(0, dense.size() + 1).ok());
    // The prefetching stream hands out the same batches.
    std::vector<int64_t> order = dense.epochOrder(9, 0, true);
    data::BatchStream g(*views, order, 16, false), w(dense, order, 16, false);
    while (std::optional<data::Batch> want = w.next()) {
      std::optional<data::Batch> got = g.next();
      ASSERT_TRUE(got);
      expectSameTensor(got->examples, want->examples);
      expectSameTensor(got->labels, want->labels);
    }
    EXPECT_FALSE(g.next());
  }
}

/// Bytes the heap holds now (mmap'd blocks included: large tensors live there).
size_t heapBytes() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

TEST(TextWindows, HoldTheIdsOnceNotEveryWindow) {
  SCOPED_TRACE("seed " + std::to_string(rngSeed()));
  auto ids = std::make_shared<const std::vector<int32_t>>(randomIds(100000, 80));
  std::vector<int32_t> copy = *ids;
  // Dense windows of 64 every 2 tokens would take 2 * 49,968 * 64 * 4 bytes (25.6 MB); over a
  // copy of the ids they take the copy (400 KB), over the ids themselves nothing.
  {
    size_t before = heapBytes();
    rt::Expected<data::Dataset> windows = data::nextTokenWindows(copy, 64, 2);
    ASSERT_TRUE(windows.ok()) << windows.message();
    EXPECT_LT(heapBytes() - before, copy.size() * 4 + (size_t(64) << 10));
  }
  std::optional<data::Dataset> some;
  {
    size_t before = heapBytes();
    rt::Expected<data::Dataset> windows = data::nextTokenWindows(*ids, ids, 64, 2);
    ASSERT_TRUE(windows.ok()) << windows.message();
    EXPECT_EQ(windows->size(), 49968);
    rt::Expected<data::Dataset> slice = windows->slice(100, 40000);
    ASSERT_TRUE(slice.ok()) << slice.message();
    EXPECT_LT(heapBytes() - before, size_t(64) << 10);
    some = std::move(*slice);
  }
  // They keep the ids alive: batches read them after the caller and the whole set let go.
  ids.reset();
  data::Batch batch = some->batch({0, 39899}, 2, 0);
  ASSERT_EQ(batch.examples.type().shape, (std::vector<int64_t>{2, 64}));
  for (int64_t t = 0; t < 64; ++t) {
    EXPECT_EQ(batch.examples.data<int32_t>()[t], copy[size_t(200 + t)]);
    EXPECT_EQ(batch.labels.data<int32_t>()[64 + t], copy[size_t(2 * 39999 + t + 1)]);
  }
}

// readEncodedText reads the file into its ids without a copy of the text: the same vocabulary
// and ids as encoding the whole text, for every byte value; an empty file is an error.
TEST(TextWindows, ReadEncodedTextMatchesEncode) {
  SCOPED_TRACE("seed " + std::to_string(rngSeed()));
  std::string text;
  for (int32_t b : randomIds(3 << 20, 256)) // several read chunks
    text.push_back(char(b));
  text += "\n\xff";
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("smelt-text-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "text.txt", std::ios::binary) << text;
  std::ofstream(dir / "empty.txt").flush();

  rt::Expected<data::EncodedText> read = data::readEncodedText((dir / "text.txt").string());
  ASSERT_TRUE(read.ok()) << read.message();
  data::CharVocabulary vocabulary = data::CharVocabulary::of(text);
  EXPECT_EQ(read->vocabulary.symbols(), vocabulary.symbols());
  EXPECT_EQ(read->ids, *vocabulary.encode(text));

  rt::Expected<data::EncodedText> empty = data::readEncodedText((dir / "empty.txt").string());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("empty.txt: the text file is empty"), std::string::npos)
      << empty.message();
  std::filesystem::remove_all(dir);
}

} // namespace
} // namespace smelt::test
