// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/fibermap_columns.hpp"

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace ex2d {
namespace {

// Names, FITS types and units are the DESI data model's (datamodel 4.8); the descriptions are
// ex2d's own, kept under 48 characters so that the TTYPE card keeps them whole.
FibermapColumns make_builtin()
{
    FibermapColumns t;
    t.source = "built-in";
    t.columns = {
        {"TARGETID", "K", "", "DESI target identifier, unique per target"},
        {"PETAL_LOC", "I", "", "Petal holding the fibre (0-9)"},
        {"DEVICE_LOC", "J", "", "Device position within the petal (0-523)"},
        {"LOCATION", "K", "", "1000 x PETAL_LOC + DEVICE_LOC"},
        {"FIBER", "J", "", "Fibre number on the spectrographs (0-4999)"},
        {"FIBERSTATUS", "J", "", "Fibre status bits; 0 means no known problem"},
        {"TARGET_RA", "D", "deg", "ICRS right ascension of the target"},
        {"TARGET_DEC", "D", "deg", "ICRS declination of the target"},
        {"DESINAME", "22A", "", "Sky-position name of the target"},
        {"PMRA", "E", "mas yr-1", "Proper motion along right ascension"},
        {"PMDEC", "E", "mas yr-1", "Proper motion along declination"},
        {"REF_EPOCH", "E", "yr", "Epoch of the reference astrometry"},
        {"LAMBDA_REF", "E", "Angstrom", "Wavelength the fibre was positioned for"},
        {"FA_TARGET", "K", "", "Fibre assignment target bits"},
        {"FA_TYPE", "B", "", "Fibre assignment target class"},
        {"OBJTYPE", "3A", "", "TGT, SKY, NON or BAD"},
        {"FIBERASSIGN_X", "E", "mm", "Planned focal-plane (CS5) X position"},
        {"FIBERASSIGN_Y", "E", "mm", "Planned focal-plane (CS5) Y position"},
        {"PRIORITY", "J", "", "Target priority at assignment"},
        {"SUBPRIORITY", "D", "", "Random tie-breaker in [0, 1)"},
        {"OBSCONDITIONS", "J", "", "Bits of conditions the target may use"},
        {"RELEASE", "I", "", "Legacy Surveys data release number"},
        {"BRICKNAME", "8A", "", "Legacy Surveys brick of the source"},
        {"BRICKID", "J", "", "Legacy Surveys brick number"},
        {"BRICK_OBJID", "J", "", "Source number within its brick"},
        {"MORPHTYPE", "4A", "", "Legacy Surveys model type of the source"},
        {"EBV", "E", "mag", "Milky Way reddening E(B-V)"},
        {"FLUX_G", "E", "nanomaggy", "Model flux, g band"},
        {"FLUX_R", "E", "nanomaggy", "Model flux, r band"},
        {"FLUX_Z", "E", "nanomaggy", "Model flux, z band"},
        {"FLUX_W1", "E", "nanomaggy", "Model flux, WISE W1"},
        {"FLUX_W2", "E", "nanomaggy", "Model flux, WISE W2"},
        {"FLUX_IVAR_G", "E", "nanomaggy^-2", "Inverse variance of FLUX_G"},
        {"FLUX_IVAR_R", "E", "nanomaggy^-2", "Inverse variance of FLUX_R"},
        {"FLUX_IVAR_Z", "E", "nanomaggy^-2", "Inverse variance of FLUX_Z"},
        {"FLUX_IVAR_W1", "E", "nanomaggy^-2", "Inverse variance of FLUX_W1"},
        {"FLUX_IVAR_W2", "E", "nanomaggy^-2", "Inverse variance of FLUX_W2"},
        {"FIBERFLUX_G", "E", "nanomaggy", "g flux of the source expected in a fibre"},
        {"FIBERFLUX_R", "E", "nanomaggy", "r flux of the source expected in a fibre"},
        {"FIBERFLUX_Z", "E", "nanomaggy", "z flux of the source expected in a fibre"},
        {"FIBERTOTFLUX_G", "E", "nanomaggy", "g flux of all sources expected in a fibre"},
        {"FIBERTOTFLUX_R", "E", "nanomaggy", "r flux of all sources expected in a fibre"},
        {"FIBERTOTFLUX_Z", "E", "nanomaggy", "z flux of all sources expected in a fibre"},
        {"MASKBITS", "I", "", "Legacy Surveys photometry flags"},
        {"SERSIC", "E", "", "Sersic index of the model"},
        {"SHAPE_R", "E", "arcsec", "Half-light radius of the model"},
        {"SHAPE_E1", "E", "", "First ellipticity component of the model"},
        {"SHAPE_E2", "E", "", "Second ellipticity component of the model"},
        {"REF_ID", "K", "", "Identifier in the reference catalogue"},
        {"REF_CAT", "2A", "", "Reference catalogue of the source"},
        {"GAIA_PHOT_G_MEAN_MAG", "E", "mag", "Gaia G magnitude"},
        {"GAIA_PHOT_BP_MEAN_MAG", "E", "mag", "Gaia BP magnitude"},
        {"GAIA_PHOT_RP_MEAN_MAG", "E", "mag", "Gaia RP magnitude"},
        {"PARALLAX", "E", "mas", "Parallax from the reference catalogue"},
        {"PHOTSYS", "1A", "", "Imaging system: N (north) or S (south)"},
        {"PRIORITY_INIT", "K", "", "Target priority before any observation"},
        {"NUMOBS_INIT", "K", "", "Observations planned for the target"},
        {"CMX_TARGET", "K", "", "Commissioning target bits"},
        {"SV1_DESI_TARGET", "K", "", "SV1 DESI target bits"},
        {"SV2_DESI_TARGET", "K", "", "SV2 DESI target bits"},
        {"SV3_DESI_TARGET", "K", "", "SV3 DESI target bits"},
        {"SV1_BGS_TARGET", "K", "", "SV1 BGS target bits"},
        {"SV2_BGS_TARGET", "K", "", "SV2 BGS target bits"},
        {"SV3_BGS_TARGET", "K", "", "SV3 BGS target bits"},
        {"SV1_MWS_TARGET", "K", "", "SV1 MWS target bits"},
        {"SV2_MWS_TARGET", "K", "", "SV2 MWS target bits"},
        {"SV3_MWS_TARGET", "K", "", "SV3 MWS target bits"},
        {"SV1_SCND_TARGET", "K", "", "SV1 secondary target bits"},
        {"SV2_SCND_TARGET", "K", "", "SV2 secondary target bits"},
        {"SV3_SCND_TARGET", "K", "", "SV3 secondary target bits"},
        {"DESI_TARGET", "K", "", "DESI target bits"},
        {"BGS_TARGET", "K", "", "BGS target bits"},
        {"MWS_TARGET", "K", "", "MWS target bits"},
        {"SCND_TARGET", "K", "", "Secondary target bits"},
        {"PLATE_RA", "D", "deg", "Right ascension the positioners aimed at"},
        {"PLATE_DEC", "D", "deg", "Declination the positioners aimed at"},
        {"NUM_ITER", "K", "", "Positioner correction moves made"},
        {"FIBER_X", "D", "mm", "CS5 X position asked of the positioner"},
        {"FIBER_Y", "D", "mm", "CS5 Y position asked of the positioner"},
        {"DELTA_X", "D", "mm", "CS5 X asked minus reached"},
        {"DELTA_Y", "D", "mm", "CS5 Y asked minus reached"},
        {"FIBER_RA", "D", "deg", "Right ascension where the fibre was"},
        {"FIBER_DEC", "D", "deg", "Declination where the fibre was"},
        {"EXPTIME", "D", "s", "Time the shutter was open"},
    };
    return t;
}

Status format_error(const std::string& path, const std::string& what)
{
    return Status::format(path + ": fibermap column table: " + what);
}

}  // namespace

const FibermapColumn* FibermapColumns::find(const std::string& name) const
{
    for (const FibermapColumn& c : columns) {
        if (c.name == name) return &c;
    }
    return nullptr;
}

const FibermapColumns& builtin_fibermap_columns()
{
    static const FibermapColumns table = make_builtin();
    return table;
}

Result<FibermapColumns> read_fibermap_columns_json(const std::string& path)
{
    std::ifstream in(path);
    if (!in) return Status::io(path + ": cannot open the fibermap column table");
    nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    if (doc.is_discarded()) return format_error(path, "not valid JSON");
    if (!doc.is_array()) return format_error(path, "expected a list of columns");
    FibermapColumns table;
    table.source = path;
    std::set<std::string> seen;
    for (std::size_t i = 0; i < doc.size(); ++i) {
        const nlohmann::json& entry = doc[i];
        const std::string where = "entry " + std::to_string(i);
        if (!entry.is_object()) return format_error(path, where + " is not an object");
        FibermapColumn column;
        for (auto [key, field] :
             {std::pair{"name", &column.name}, std::pair{"tform", &column.tform},
              std::pair{"unit", &column.unit}, std::pair{"description", &column.description}}) {
            auto it = entry.find(key);
            if (it == entry.end()) continue;
            if (!it->is_string())
                return format_error(path, where + ": " + key + " is not a string");
            *field = it->get<std::string>();
        }
        if (column.name.empty()) return format_error(path, where + " has no name");
        if (!seen.insert(column.name).second) {
            return format_error(path, where + ": column " + column.name + " is given twice");
        }
        table.columns.push_back(std::move(column));
    }
    return table;
}

}  // namespace ex2d
