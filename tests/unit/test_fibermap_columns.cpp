// SPDX-License-Identifier: BSD-3-Clause
// The FIBERMAP annotation desispec's write_frame applies (datamodel 4.8): units after TFORMn,
// descriptions as TTYPEn comments, unknown columns untouched; the column tables it reads.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fitsio.h>
#include <gtest/gtest.h>

#include "ex2d/fibermap_columns.hpp"
#include "ex2d/frame_io.hpp"
#include "ex2d/preproc.hpp"
#include "fits_fixtures.hpp"
#include "test_paths.hpp"

namespace {

constexpr int kNspec = 2;
constexpr int kNwave = 4;

struct TestColumn {
    const char* name;
    const char* tform;
    const char* unit;  ///< "" = no TUNIT card
};

/// A 2-row FIBERMAP with the given columns, FIBER first (fibres 0 and 1), the others zero.
ex2d::FitsTableBlob fibermap_with(const std::vector<TestColumn>& columns)
{
    size_t size = 0;
    void* buffer = nullptr;
    fitsfile* f = nullptr;
    int status = 0;
    std::vector<char*> ttype{const_cast<char*>("FIBER")}, tform{const_cast<char*>("J")};
    std::vector<char*> tunit{const_cast<char*>("")};
    for (const TestColumn& c : columns) {
        ttype.push_back(const_cast<char*>(c.name));
        tform.push_back(const_cast<char*>(c.tform));
        tunit.push_back(const_cast<char*>(c.unit));
    }
    fits_create_memfile(&f, &buffer, &size, 2880, std::realloc, &status);
    fits_create_img(f, BYTE_IMG, 0, nullptr, &status);
    fits_create_tbl(f, BINARY_TBL, kNspec, int(ttype.size()), ttype.data(), tform.data(),
                    tunit.data(), "FIBERMAP", &status);
    long long fibers[kNspec] = {0, 1};
    fits_write_col(f, TLONGLONG, 1, 1, 1, kNspec, fibers, &status);
    return ex2d::test::close_table_blob(f, buffer, status, kNspec);
}

ex2d::ExtractedFrame tiny_frame()
{
    ex2d::ExtractedFrame fr;
    fr.nspec = kNspec;
    fr.nwave = kNwave;
    fr.ndiag = 3;
    for (int j = 0; j < kNwave; ++j) fr.wave.push_back(6000.0 + 0.8 * j);
    fr.flux.assign(kNspec * kNwave, 1.0);
    fr.ivar.assign(kNspec * kNwave, 1.0);
    fr.mask.assign(kNspec * kNwave, 0);
    fr.chi2pix.assign(kNspec * kNwave, 1.0);
    fr.resolution.assign(kNspec * 3 * kNwave, 0.1);
    return fr;
}

ex2d::FrameProvenance provenance_with(ex2d::FitsTableBlob fibermap)
{
    ex2d::FrameProvenance p;
    p.image_header.set_string("CAMERA", "r0");
    p.image_header.set_string("FLAVOR", "science");
    p.fibermap = std::move(fibermap);
    p.options.wmin = 6000.0;
    p.options.wmax = 6002.4;
    p.options.dw = 0.8;
    p.options.nspec = kNspec;
    p.write_scores = false;
    return p;
}

/// Header cards of the frame's FIBERMAP HDU, in file order: keyword, value text, comment.
struct Card {
    std::string key, value, comment;
};
std::vector<Card> fibermap_cards(const std::string& path)
{
    fitsfile* f = nullptr;
    int status = 0;
    fits_open_file(&f, path.c_str(), READONLY, &status);
    fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &status);
    int nkeys = 0;
    fits_get_hdrspace(f, &nkeys, nullptr, &status);
    std::vector<Card> cards;
    for (int i = 1; i <= nkeys; ++i) {
        char key[FLEN_KEYWORD], value[FLEN_VALUE], comment[FLEN_COMMENT];
        fits_read_keyn(f, i, key, value, comment, &status);
        cards.push_back({key, value, comment});
    }
    fits_close_file(f, &status);
    EXPECT_EQ(status, 0) << path;
    return cards;
}

/// A string keyword's value without its quotes and FITS's trailing padding.
std::string text_of(const Card* card)
{
    if (card == nullptr) return "<absent>";
    std::string v = card->value;
    if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
    while (!v.empty() && v.back() == ' ') v.pop_back();
    return v;
}

const Card* find_card(const std::vector<Card>& cards, const std::string& key)
{
    for (const Card& c : cards) {
        if (c.key == key) return &c;
    }
    return nullptr;
}

/// Keywords of the column cards (TTYPEn, TFORMn, TUNITn) in file order.
std::vector<std::string> column_keywords(const std::vector<Card>& cards)
{
    std::vector<std::string> keys;
    for (const Card& c : cards) {
        if (c.key.rfind("TTYPE", 0) == 0 || c.key.rfind("TFORM", 0) == 0 ||
            c.key.rfind("TUNIT", 0) == 0) {
            keys.push_back(c.key);
        }
    }
    return keys;
}

std::string write_json(const ex2d::test::TempDir& dir, const std::string& name,
                       const std::string& text)
{
    std::string path = dir.file(name);
    std::ofstream(path) << text;
    return path;
}

TEST(FibermapColumns, BuiltinTableHasTheDataModelUnitsInOrder)
{
    const ex2d::FibermapColumns& table = ex2d::builtin_fibermap_columns();
    ASSERT_EQ(table.columns.size(), 84u);  // 71 main-survey columns + 13 CMX/SV target masks
    EXPECT_EQ(table.columns.front().name, "TARGETID");
    EXPECT_EQ(table.columns.back().name, "EXPTIME");
    const std::vector<std::pair<std::string, std::string>> units = {
        {"TARGET_RA", "deg"},
        {"TARGET_DEC", "deg"},
        {"PLATE_RA", "deg"},
        {"PLATE_DEC", "deg"},
        {"FIBER_RA", "deg"},
        {"FIBER_DEC", "deg"},
        {"PMRA", "mas yr-1"},
        {"LAMBDA_REF", "Angstrom"},
        {"FLUX_IVAR_W2", "nanomaggy^-2"},
        {"FIBER_X", "mm"},
        {"EXPTIME", "s"},
        {"SHAPE_R", "arcsec"},
        {"FIBERSTATUS", ""},
        {"OBJTYPE", ""}};
    for (const auto& [name, unit] : units) {
        const ex2d::FibermapColumn* c = table.find(name);
        ASSERT_NE(c, nullptr) << name;
        EXPECT_EQ(c->unit, unit) << name;
        EXPECT_FALSE(c->description.empty()) << name;
        // A TTYPE card holds 80 characters: the value and " / " leave about 47 for a comment.
        EXPECT_LE(c->description.size(), 47u) << name;
    }
    EXPECT_EQ(table.find("DESINAME")->tform, "22A");
    EXPECT_EQ(table.find("FA_TYPE")->tform, "B");
    EXPECT_EQ(table.find("NOT_A_COLUMN"), nullptr);
}

TEST(FibermapColumns, FrameFibermapGetsUnitsAfterTformAndDescriptions)
{
    ex2d::test::TempDir dir;
    const std::string path = dir.file("frame.fits");
    // TARGET_RA has no unit, TARGET_DEC a wrong one, MY_COLUMN is unknown and keeps its unit.
    const auto fibermap = fibermap_with({{"TARGET_RA", "D", ""},
                                         {"TARGET_DEC", "D", "degree"},
                                         {"MY_COLUMN", "E", "furlong"},
                                         {"FIBERSTATUS", "J", ""}});
    ASSERT_TRUE(ex2d::write_frame(path, tiny_frame(), provenance_with(fibermap)).is_ok());
    const std::vector<Card> cards = fibermap_cards(path);
    EXPECT_EQ(column_keywords(cards),
              (std::vector<std::string>{"TTYPE1", "TFORM1", "TTYPE2", "TFORM2", "TUNIT2", "TTYPE3",
                                        "TFORM3", "TUNIT3", "TTYPE4", "TFORM4", "TUNIT4", "TTYPE5",
                                        "TFORM5"}));
    const ex2d::FibermapColumns& table = ex2d::builtin_fibermap_columns();
    EXPECT_EQ(text_of(find_card(cards, "TUNIT2")), "deg");
    EXPECT_EQ(find_card(cards, "TUNIT2")->comment, "TARGET_RA units");
    EXPECT_EQ(text_of(find_card(cards, "TUNIT3")), "deg");
    EXPECT_EQ(find_card(cards, "TUNIT3")->comment, "TARGET_DEC units");
    EXPECT_EQ(text_of(find_card(cards, "TUNIT4")), "furlong");
    EXPECT_EQ(find_card(cards, "TTYPE1")->comment, table.find("FIBER")->description);
    EXPECT_EQ(find_card(cards, "TTYPE2")->comment, table.find("TARGET_RA")->description);
    EXPECT_EQ(find_card(cards, "TTYPE5")->comment, table.find("FIBERSTATUS")->description);
    EXPECT_NE(find_card(cards, "TTYPE4")->comment, "");  // CFITSIO's own, left alone
    // The frame still reads back, fibres and all.
    auto frame = ex2d::read_frame(path);
    ASSERT_TRUE(frame.is_ok()) << frame.status().to_string();
    EXPECT_EQ(frame.value().fiber, (std::vector<long long>{0, 1}));
}

TEST(FibermapColumns, SiteTableGivesItsOwnDescriptionsAndUnits)
{
    ex2d::test::TempDir dir;
    const std::string json = write_json(dir, "columns.json", R"([
        {"name": "TARGET_RA", "tform": "D", "unit": "deg", "description": "Site RA words"},
        {"name": "FIBER", "unit": "", "description": "Site fibre words"}
    ])");
    auto table = ex2d::read_fibermap_columns_json(json);
    ASSERT_TRUE(table.is_ok()) << table.status().to_string();
    EXPECT_EQ(table.value().source, json);
    ex2d::FrameProvenance prov = provenance_with(fibermap_with({{"TARGET_RA", "D", ""}}));
    prov.fibermap_columns = std::make_shared<const ex2d::FibermapColumns>(table.value());
    const std::string path = dir.file("frame.fits");
    ASSERT_TRUE(ex2d::write_frame(path, tiny_frame(), prov).is_ok());
    const std::vector<Card> cards = fibermap_cards(path);
    EXPECT_EQ(find_card(cards, "TTYPE1")->comment, "Site fibre words");
    EXPECT_EQ(find_card(cards, "TTYPE2")->comment, "Site RA words");
    EXPECT_EQ(text_of(find_card(cards, "TUNIT2")), "deg");
}

TEST(FibermapColumns, AnnotatingTwiceChangesNothing)
{
    // A preproc FIBERMAP that desispec (or ex2d simulate) already annotated is copied as is.
    ex2d::test::TempDir dir;
    const auto fibermap = fibermap_with({{"TARGET_RA", "D", ""}, {"EBV", "E", ""}});
    ASSERT_TRUE(
        ex2d::write_frame(dir.file("a.fits"), tiny_frame(), provenance_with(fibermap)).is_ok());
    auto annotated = ex2d::read_fibermap(dir.file("a.fits"));
    ASSERT_TRUE(annotated.is_ok()) << annotated.status().to_string();
    ASSERT_TRUE(
        ex2d::write_frame(dir.file("b.fits"), tiny_frame(), provenance_with(annotated.value()))
            .is_ok());
    const std::vector<Card> a = fibermap_cards(dir.file("a.fits"));
    const std::vector<Card> b = fibermap_cards(dir.file("b.fits"));
    ASSERT_EQ(column_keywords(a), column_keywords(b));
    for (const std::string& key : column_keywords(a)) {
        EXPECT_EQ(find_card(a, key)->value, find_card(b, key)->value) << key;
        EXPECT_EQ(find_card(a, key)->comment, find_card(b, key)->comment) << key;
    }
}

TEST(FibermapColumns, BadTablesAreRefusedNamingTheFileAndEntry)
{
    ex2d::test::TempDir dir;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"{not json", "not valid JSON"},
        {R"({"name": "FIBER"})", "expected a list of columns"},
        {R"(["FIBER"])", "entry 0 is not an object"},
        {R"([{"unit": "deg"}])", "entry 0 has no name"},
        {R"([{"name": "FIBER"}, {"name": "FIBER"}])", "entry 1: column FIBER is given twice"},
        {R"([{"name": "TARGET_RA", "unit": 3}])", "entry 0: unit is not a string"},
    };
    int i = 0;
    for (const auto& [text, message] : cases) {
        const std::string path = write_json(dir, "bad" + std::to_string(i++) + ".json", text);
        auto table = ex2d::read_fibermap_columns_json(path);
        ASSERT_FALSE(table.is_ok()) << text;
        EXPECT_EQ(table.status().code(), ex2d::StatusCode::format_error) << text;
        EXPECT_NE(table.status().message().find(path), std::string::npos);
        EXPECT_NE(table.status().message().find(message), std::string::npos)
            << table.status().message();
    }
    auto missing = ex2d::read_fibermap_columns_json(dir.file("absent.json"));
    ASSERT_FALSE(missing.is_ok());
    EXPECT_EQ(missing.status().code(), ex2d::StatusCode::io_error);
}

}  // namespace
