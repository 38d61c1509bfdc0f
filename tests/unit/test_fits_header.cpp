// SPDX-License-Identifier: BSD-3-Clause
// FitsHeader: parsing of 80-character cards and replace-or-append of values.
#include <string>

#include <gtest/gtest.h>

#include "ex2d/fits_header.hpp"

namespace {

std::string card(const std::string& text)
{
    std::string c = text;
    c.resize(80, ' ');
    return c;
}

ex2d::FitsHeader sample_header()
{
    ex2d::FitsHeader h;
    h.cards = {
        card("SIMPLE  =                    T / file does conform to FITS standard"),
        card("NAXIS1  =                 4114 / length of data axis 1"),
        card("EXTNAME = 'PSF     '"),
        card("PSFVER  = '3       '"),
        card("CAMERA  = '''r0      '''       / camera ID"),
        card("WAVEMIN =                5543. / minimum wavelength (A)"),
        card("MEANDX  = -0.09100032995670529"),
        card("DEXP    =               1.5D-3 / FITS allows D exponents"),
        card("NOTE    = 'it''s / not a comment' / real comment"),
        card("COMMENT this card has no value"),
        card("EMPTY   = '        '"),
    };
    return h;
}

TEST(FitsHeader, ParsesIntegersRealsAndStrings)
{
    ex2d::FitsHeader h = sample_header();
    EXPECT_TRUE(h.has("NAXIS1"));
    EXPECT_TRUE(h.has("naxis1"));
    EXPECT_FALSE(h.has("NAXIS2"));
    EXPECT_EQ(h.get_int("NAXIS1").value(), 4114);
    EXPECT_DOUBLE_EQ(h.get_double("NAXIS1").value(), 4114.0);
    EXPECT_DOUBLE_EQ(h.get_double("WAVEMIN").value(), 5543.0);
    EXPECT_EQ(h.get_int("WAVEMIN").value(), 5543);  // integral real
    EXPECT_EQ(h.get_double("MEANDX").value(), -0.09100032995670529);
    EXPECT_FALSE(h.get_int("MEANDX").has_value());
    EXPECT_DOUBLE_EQ(h.get_double("DEXP").value(), 1.5e-3);
    EXPECT_EQ(h.get_string("EXTNAME").value(), "PSF");
    EXPECT_EQ(h.get_string("PSFVER").value(), "3");
    EXPECT_FALSE(h.get_int("PSFVER").has_value());  // a string is not a number
    EXPECT_FALSE(h.get_double("EXTNAME").has_value());
    EXPECT_EQ(h.get_string("EMPTY").value(), "");
    EXPECT_FALSE(h.get_string("MISSING").has_value());
    EXPECT_FALSE(h.get_double("COMMENT").has_value());
}

TEST(FitsHeader, UnescapesQuotesAndKeepsSlashesInsideStrings)
{
    ex2d::FitsHeader h = sample_header();
    EXPECT_EQ(h.get_string("CAMERA").value(), "'r0      '");
    EXPECT_EQ(h.get_string("NOTE").value(), "it's / not a comment");
}

TEST(FitsHeader, SetReplacesInPlaceAndAppendsNewKeys)
{
    ex2d::FitsHeader h = sample_header();
    const size_t n = h.cards.size();
    h.set_int("NAXIS1", 17, "new comment");
    ASSERT_EQ(h.cards.size(), n);
    EXPECT_EQ(h.cards[1].substr(0, 30), "NAXIS1  =                   17");
    EXPECT_NE(h.cards[1].find("/ new comment"), std::string::npos);
    EXPECT_EQ(h.get_int("NAXIS1").value(), 17);

    h.set_string("FLAVOR", "science", "exposure flavor");
    ASSERT_EQ(h.cards.size(), n + 1);
    EXPECT_EQ(h.cards.back().substr(0, 20), "FLAVOR  = 'science '");
    EXPECT_EQ(h.get_string("FLAVOR").value(), "science");

    h.set_double("WAVESTEP", 0.8);
    EXPECT_EQ(h.cards.back().substr(0, 30), "WAVESTEP=                  0.8");
    EXPECT_EQ(h.get_double("WAVESTEP").value(), 0.8);

    for (const std::string& c : h.cards) EXPECT_EQ(c.size(), 80u);
}

TEST(FitsHeader, DoublesRoundTripExactly)
{
    ex2d::FitsHeader h;
    const double values[] = {5543.0, 7620.000000000423, 1e-15,       -0.09100032995670529,
                             1e300,  0.1 + 0.2,         2147483648.0};
    for (double v : values) {
        h.set_double("X", v);
        ASSERT_EQ(h.cards.size(), 1u);
        EXPECT_EQ(h.get_double("X").value(), v) << h.cards[0];
        // Always a real for FITS readers: a decimal point in the value field.
        std::string field = h.cards[0].substr(10, 20);
        EXPECT_NE(field.find('.'), std::string::npos) << h.cards[0];
    }
    h.set_double("X", 5543.0);
    EXPECT_EQ(h.cards[0].substr(0, 30), "X       =               5543.0");
}

TEST(FitsHeader, StringsWithQuotesAreEscaped)
{
    ex2d::FitsHeader h;
    h.set_string("CAMERA", "'r0'");
    EXPECT_EQ(h.cards[0].substr(0, 22), "CAMERA  = '''r0''  '  ");
    EXPECT_EQ(h.get_string("CAMERA").value(), "'r0'");
}

TEST(FitsHeader, LongStringsUseContinueCards)
{
    ex2d::FitsHeader h;
    std::string path(150, 'a');
    path += "/psf-r0-00051060.fits it's long";
    h.set_string("IN_PSF", path, "Input spectral PSF");
    h.set_int("NSPEC", 500);
    ASSERT_GE(h.cards.size(), 4u);
    EXPECT_EQ(h.cards[1].substr(0, 10), "CONTINUE  ");
    EXPECT_EQ(h.get_string("IN_PSF").value(), path);
    EXPECT_EQ(h.get_int("NSPEC").value(), 500);
    for (const std::string& c : h.cards) EXPECT_EQ(c.size(), 80u);

    h.set_string("IN_PSF", "short");
    EXPECT_EQ(h.cards.size(), 2u);
    EXPECT_EQ(h.get_string("IN_PSF").value(), "short");
    EXPECT_EQ(h.get_int("NSPEC").value(), 500);
}

TEST(FitsHeader, HierarchKeysAreReadAndWritten)
{
    ex2d::FitsHeader h;
    h.cards = {card("HIERARCH ESO DET CHIP NAME = 'ccd 1' / the chip"),
               card("HIERARCH ESO DET GAIN = 1.25 / e-/ADU")};
    EXPECT_EQ(h.get_string("ESO DET CHIP NAME").value(), "ccd 1");
    EXPECT_DOUBLE_EQ(h.get_double("eso det gain").value(), 1.25);
    h.set_int("EXPOSURETIME", 900, "longer than 8 characters");
    EXPECT_EQ(h.cards.back().substr(0, 23), "HIERARCH EXPOSURETIME =");
    EXPECT_EQ(h.get_int("EXPOSURETIME").value(), 900);
    EXPECT_EQ(h.cards.back().size(), 80u);
}

TEST(FitsHeader, ContinueCardsWithQuotesAndComments)
{
    // As astropy writes them: quotes doubled in every piece, the comment on the last card.
    ex2d::FitsHeader h;
    h.cards = {card("DEPNAM00= 'it''s&'"), card("CONTINUE  '  a ''/'' b&'"),
               card("CONTINUE  'end  ' / the comment"), card("NEXT    = 'x'")};
    EXPECT_EQ(h.get_string("DEPNAM00").value(), "it's  a '/' bend");
    EXPECT_EQ(h.get_string("NEXT").value(), "x");
}

TEST(FitsHeader, EraseRemovesTheCard)
{
    ex2d::FitsHeader h = sample_header();
    const size_t n = h.cards.size();
    h.erase("CAMERA");
    EXPECT_EQ(h.cards.size(), n - 1);
    EXPECT_FALSE(h.has("CAMERA"));
    h.erase("CAMERA");
    EXPECT_EQ(h.cards.size(), n - 1);
}

}  // namespace
